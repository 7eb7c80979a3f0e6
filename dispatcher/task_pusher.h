// Pushes new tasks to their workers (WorkerService.ProcessTask) the moment
// the dispatcher creates them, so a new iteration starts without waiting
// for each worker's next heartbeat. Best effort: a failed push is logged at
// debug level and the heartbeat hands the task over instead.
#ifndef SLUICE_DISPATCHER_TASK_PUSHER_H_
#define SLUICE_DISPATCHER_TASK_PUSHER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/worker_client.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// A worker's channel without pushes for this long goes idle.
inline constexpr int kPushIdleTimeoutMs = 5000;

class GrpcTaskPusher {
 public:
  // Starts the call and returns at once; never blocks on the network.
  void Push(const std::string& worker_address, const proto::TaskDef& task);

 private:
  // One client per worker, kept for the dispatcher's life (a worker that
  // comes back at the same address reuses its channel).
  WorkerClient& ClientFor(const std::string& worker_address);

  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<WorkerClient>> clients_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_TASK_PUSHER_H_
