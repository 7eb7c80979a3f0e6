#include "dispatcher/grpc_dispatcher_impl.h"

#include "service/element_wire.h"
#include "service/grpc_util.h"

namespace sluice::dispatcher {

#define SLUICE_DEFINE_RPC(Method, Request, Response)                                                       \
  grpc::ServerUnaryReactor* GrpcDispatcherImpl::Method(                                                    \
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request, grpc::ByteBuffer* response) { \
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();                                         \
    calls_.Schedule([this, reactor, request, response] {                                                   \
      proto::Request parsed;                                                                               \
      absl::Status status = ParseRequest(*request, #Method, &parsed);                                      \
      proto::Response answer;                                                                              \
      if (status.ok()) status = impl_->Method(parsed, &answer);                                            \
      if (status.ok()) *response = SerializeToByteBuffer(answer);                                          \
      reactor->Finish(ToGrpcStatus(status));                                                               \
    });                                                                                                    \
    return reactor;                                                                                        \
  }
SLUICE_DISPATCHER_RPCS(SLUICE_DEFINE_RPC)
#undef SLUICE_DEFINE_RPC

}  // namespace sluice::dispatcher
