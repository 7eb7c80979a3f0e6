#include "dispatcher/grpc_dispatcher_impl.h"

#include "common/grpc_util.h"

namespace sluice::dispatcher {

#define SLUICE_DISPATCHER_RPC(Method, Request, Response)                                       \
  grpc::Status GrpcDispatcherImpl::Method(grpc::ServerContext*, const proto::Request* request, \
                                          proto::Response* response) {                         \
    return ToGrpcStatus(impl_->Method(*request, response));                                    \
  }
SLUICE_DISPATCHER_RPC(GetVersion, GetVersionRequest, GetVersionResponse)
SLUICE_DISPATCHER_RPC(GetOrRegisterDataset, GetOrRegisterDatasetRequest, GetOrRegisterDatasetResponse)
SLUICE_DISPATCHER_RPC(GetDatasetInfo, GetDatasetInfoRequest, GetDatasetInfoResponse)
SLUICE_DISPATCHER_RPC(GetOrCreateJob, GetOrCreateJobRequest, GetOrCreateJobResponse)
SLUICE_DISPATCHER_RPC(GetOrCreateIteration, GetOrCreateIterationRequest, GetOrCreateIterationResponse)
SLUICE_DISPATCHER_RPC(ClientHeartbeat, ClientHeartbeatRequest, ClientHeartbeatResponse)
SLUICE_DISPATCHER_RPC(ReleaseIterationClient, ReleaseIterationClientRequest, ReleaseIterationClientResponse)
SLUICE_DISPATCHER_RPC(WorkerHeartbeat, WorkerHeartbeatRequest, WorkerHeartbeatResponse)
SLUICE_DISPATCHER_RPC(WorkerUpdates, WorkerUpdatesRequest, WorkerUpdatesResponse)
SLUICE_DISPATCHER_RPC(WorkerShutdown, WorkerShutdownRequest, WorkerShutdownResponse)
SLUICE_DISPATCHER_RPC(GetSplits, GetSplitsRequest, GetSplitsResponse)
SLUICE_DISPATCHER_RPC(GetWorkers, GetWorkersRequest, GetWorkersResponse)
SLUICE_DISPATCHER_RPC(GetStatus, GetStatusRequest, StatusSnapshot)
#undef SLUICE_DISPATCHER_RPC

}  // namespace sluice::dispatcher
