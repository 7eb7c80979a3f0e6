#include "dispatcher/grpc_dispatcher_impl.h"

#include "common/grpc_util.h"

namespace sluice::dispatcher {

#define SLUICE_DEFINE_RPC(Method, Request, Response)                                           \
  grpc::Status GrpcDispatcherImpl::Method(grpc::ServerContext*, const proto::Request* request, \
                                          proto::Response* response) {                         \
    return ToGrpcStatus(impl_->Method(*request, response));                                    \
  }
SLUICE_DISPATCHER_RPCS(SLUICE_DEFINE_RPC)
#undef SLUICE_DEFINE_RPC

}  // namespace sluice::dispatcher
