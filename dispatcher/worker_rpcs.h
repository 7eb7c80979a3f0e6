// WorkerRpcs: the workers' requests. A heartbeat registers a worker (a new
// incarnation replaces the old, whose tasks are lost), gives it a task in
// every unfinished iteration and says which of its tasks to drop; updates
// report tasks finished or failed; GetSplits leases distributed_epoch
// splits (a retry gets the same lease); DrainWorker marks a worker
// draining, as its own heartbeat does after SIGTERM.
#ifndef SLUICE_DISPATCHER_WORKER_RPCS_H_
#define SLUICE_DISPATCHER_WORKER_RPCS_H_

#include "absl/status/status.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/liveness.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// Whether a heartbeat's answer tells its worker anything: tasks to start
// or drop, or to drain. One that does waits for the journal (the answer may
// rest on records of other requests not yet on disk); most heartbeats
// tell nothing and change nothing, and answer without that wait.
bool HeartbeatAnswerTellsAnything(const proto::WorkerHeartbeatResponse& response);

class WorkerRpcs {
 public:
  WorkerRpcs(DispatcherCore& core, Liveness& liveness);

  // `*journaled`: whether the heartbeat changed the state (registered the
  // worker, lost its previous run's tasks or drained it), set or left.
  absl::Status WorkerHeartbeat(const proto::WorkerHeartbeatRequest& request,
                               proto::WorkerHeartbeatResponse* response, const Caller& caller,
                               bool* journaled);
  absl::Status WorkerUpdates(const proto::WorkerUpdatesRequest& request,
                             proto::WorkerUpdatesResponse* response, const Caller& caller);
  absl::Status WorkerShutdown(const proto::WorkerShutdownRequest& request,
                              proto::WorkerShutdownResponse* response, const Caller& caller);
  absl::Status GetSplits(const proto::GetSplitsRequest& request, proto::GetSplitsResponse* response,
                         const Caller& caller);
  // `sluice drain`: NotFound for an address no worker registered with;
  // draining one twice is not an error.
  absl::Status DrainWorker(const proto::DrainWorkerRequest& request, proto::DrainWorkerResponse* response,
                           const Caller& caller);

 private:
  using Clock = DispatcherCore::Clock;
  using NewTasks = DispatcherCore::NewTasks;

  DispatcherCore& core_;
  Liveness& liveness_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_WORKER_RPCS_H_
