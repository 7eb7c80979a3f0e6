#include "dispatcher/task_pusher.h"

#include <spdlog/spdlog.h>

namespace sluice::dispatcher {

WorkerClient& GrpcTaskPusher::ClientFor(const std::string& worker_address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<WorkerClient>& client = clients_[worker_address];
  // A push is rare (a task made); an idle channel lets its connection go,
  // so that workers gone for good are not redialled every second for the
  // dispatcher's life.
  if (client == nullptr) {
    client = std::make_unique<WorkerClient>(worker_address, 1,
                                            ChannelOptions{.idle_timeout_ms = kPushIdleTimeoutMs});
  }
  return *client;
}

void GrpcTaskPusher::Push(const std::string& worker_address, const proto::TaskDef& task) {
  ClientFor(worker_address)
      .ProcessTask(task, [worker_address, task_id = task.task_id()](absl::Status status) {
        if (!status.ok()) {
          spdlog::debug("pushing task {} to worker {} failed ({}); its heartbeat will carry it", task_id,
                        worker_address, std::string(status.message()));
        }
      });
}

}  // namespace sluice::dispatcher
