// The dispatcher's RPCs as one list, for code that does the same for each:
// X(method, request type, response type), types in sluice::proto. The
// dispatcher's gRPC adapter and DispatcherClient expand it.
#ifndef SLUICE_SERVICE_DISPATCHER_RPCS_H_
#define SLUICE_SERVICE_DISPATCHER_RPCS_H_

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
  X(GetStatus, GetStatusRequest, StatusSnapshot)                                           \
  X(DrainWorker, DrainWorkerRequest, DrainWorkerResponse)

#endif  // SLUICE_SERVICE_DISPATCHER_RPCS_H_
