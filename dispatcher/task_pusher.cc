#include "dispatcher/task_pusher.h"

#include <spdlog/spdlog.h>

namespace sluice::dispatcher {

WorkerClient& GrpcTaskPusher::ClientFor(const std::string& worker_address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<WorkerClient>& client = clients_[worker_address];
  if (client == nullptr) client = std::make_unique<WorkerClient>(worker_address);
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
