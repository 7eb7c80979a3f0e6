#include "dispatcher/task_pusher.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "service/grpc_util.h"

namespace sluice::dispatcher {
namespace {

constexpr auto kPushTimeout = std::chrono::seconds(2);

// One call's state, alive until its callback runs.
struct PushCall {
  grpc::ClientContext context;
  proto::ProcessTaskRequest request;
  proto::ProcessTaskResponse response;
  std::shared_ptr<proto::WorkerService::Stub> stub;
};

}  // namespace

std::shared_ptr<proto::WorkerService::Stub> GrpcTaskPusher::StubFor(const std::string& worker_address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[worker_address];
  if (stub == nullptr) stub = proto::WorkerService::NewStub(MakeChannel(worker_address));
  return stub;
}

void GrpcTaskPusher::Push(const std::string& worker_address, const proto::TaskDef& task) {
  auto* call = new PushCall;
  call->stub = StubFor(worker_address);
  call->context.set_deadline(std::chrono::system_clock::now() + kPushTimeout);
  *call->request.mutable_version() = CurrentVersion();
  *call->request.mutable_task() = task;
  call->stub->async()->ProcessTask(
      &call->context, &call->request, &call->response,
      [call, worker_address, task_id = task.task_id()](grpc::Status status) {
        if (!status.ok()) {
          spdlog::debug("pushing task {} to worker {} failed ({}); its heartbeat will carry it", task_id,
                        worker_address, status.error_message());
        }
        delete call;
      });
}

}  // namespace sluice::dispatcher
