// The gRPC face of DispatcherImpl: one line per RPC.
#ifndef SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_
#define SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_

#include "dispatcher/dispatcher_impl.h"
#include "sluice/service.grpc.pb.h"

namespace sluice::dispatcher {

class GrpcDispatcherImpl final : public proto::DispatcherService::Service {
 public:
  explicit GrpcDispatcherImpl(DispatcherImpl* impl) : impl_(impl) {}

#define SLUICE_DISPATCHER_RPC(Method, Request, Response)                                              \
  grpc::Status Method(grpc::ServerContext*, const proto::Request* request, proto::Response* response) \
      override;
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

 private:
  DispatcherImpl* const impl_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_
