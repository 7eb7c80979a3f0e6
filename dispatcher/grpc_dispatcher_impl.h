// The gRPC face of DispatcherImpl: one line per RPC.
#ifndef SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_
#define SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_

#include "dispatcher/dispatcher_impl.h"
#include "sluice/service.grpc.pb.h"

namespace sluice::dispatcher {

// Every dispatcher RPC: X(method, request type, response type).
#define SLUICE_DISPATCHER_RPCS(X)                                                          \
  X(GetVersion, GetVersionRequest, GetVersionResponse)                                     \
  X(GetOrRegisterDataset, GetOrRegisterDatasetRequest, GetOrRegisterDatasetResponse)       \
  X(GetDatasetInfo, GetDatasetInfoRequest, GetDatasetInfoResponse)                         \
  X(GetOrCreateJob, GetOrCreateJobRequest, GetOrCreateJobResponse)                         \
  X(GetOrCreateIteration, GetOrCreateIterationRequest, GetOrCreateIterationResponse)       \
  X(ClientHeartbeat, ClientHeartbeatRequest, ClientHeartbeatResponse)                      \
  X(ReleaseIterationClient, ReleaseIterationClientRequest, ReleaseIterationClientResponse) \
  X(WorkerHeartbeat, WorkerHeartbeatRequest, WorkerHeartbeatResponse)                      \
  X(WorkerUpdates, WorkerUpdatesRequest, WorkerUpdatesResponse)                            \
  X(WorkerShutdown, WorkerShutdownRequest, WorkerShutdownResponse)                         \
  X(GetSplits, GetSplitsRequest, GetSplitsResponse)                                        \
  X(GetWorkers, GetWorkersRequest, GetWorkersResponse)                                     \
  X(GetStatus, GetStatusRequest, StatusSnapshot)

class GrpcDispatcherImpl final : public proto::DispatcherService::Service {
 public:
  explicit GrpcDispatcherImpl(DispatcherImpl* impl) : impl_(impl) {}

#define SLUICE_DECLARE_RPC(Method, Request, Response)                                                 \
  grpc::Status Method(grpc::ServerContext*, const proto::Request* request, proto::Response* response) \
      override;
  SLUICE_DISPATCHER_RPCS(SLUICE_DECLARE_RPC)
#undef SLUICE_DECLARE_RPC

 private:
  DispatcherImpl* const impl_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_
