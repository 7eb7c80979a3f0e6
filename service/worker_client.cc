#include "service/worker_client.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "service/grpc_util.h"
#include "service/message_bytes.h"

namespace sluice {
namespace {

constexpr char kGetElementsMethod[] = "/sluice.proto.WorkerService/GetElements";

std::chrono::system_clock::time_point DeadlineIn(std::chrono::seconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

}  // namespace

// One ProcessTask call's state, alive until its callback has run and the
// destructor no longer cancels it.
struct WorkerClient::ProcessTaskCall {
  grpc::ClientContext context;
  proto::ProcessTaskRequest request;
  proto::ProcessTaskResponse response;
  std::function<void(absl::Status)> done;
};

WorkerClient::WorkerClient(std::string address, int connections, ChannelOptions options)
    : address_(std::move(address)) {
  options.own_connection = options.own_connection || connections > 1;
  std::shared_ptr<grpc::Channel> first;
  for (int i = 0; i < std::max(connections, 1); ++i) {
    std::shared_ptr<grpc::Channel> channel = MakeChannel(address_, options);
    if (first == nullptr) first = channel;
    raw_stubs_.push_back(std::make_unique<grpc::GenericStub>(std::move(channel)));
  }
  stub_ = proto::WorkerService::NewStub(first);
}

absl::Status WorkerClient::GetElements(proto::GetElementsRequest request, grpc::ByteBuffer* response) {
  *request.mutable_version() = CurrentVersion();
  const grpc::ByteBuffer request_bytes = SerializeToByteBuffer(request);
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(kGetElementsTimeout));
  absl::Notification done;
  grpc::Status status;
  grpc::GenericStub& stub =
      *raw_stubs_[next_raw_stub_.fetch_add(1, std::memory_order_relaxed) % raw_stubs_.size()];
  stub.UnaryCall(&context, kGetElementsMethod, grpc::StubOptions(), &request_bytes, response,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  return FromGrpcStatus(status);
}

absl::Status WorkerClient::OpenSharedMemory(const proto::OpenSharedMemoryRequest& request,
                                            proto::OpenSharedMemoryResponse* response) {
  proto::OpenSharedMemoryRequest versioned = request;
  *versioned.mutable_version() = CurrentVersion();
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(kOpenSharedMemoryTimeout));
  return FromGrpcStatus(stub_->OpenSharedMemory(&context, versioned, response));
}

WorkerClient::~WorkerClient() {
  // Cancelled outside the lock, in case gRPC runs a callback inline.
  std::vector<std::shared_ptr<ProcessTaskCall>> in_flight;
  {
    absl::MutexLock lock(&calls_mu_);
    for (const auto& [id, call] : calls_) {
      if (call != nullptr) in_flight.push_back(call);
    }
  }
  for (const std::shared_ptr<ProcessTaskCall>& call : in_flight) call->context.TryCancel();
  in_flight.clear();
  absl::MutexLock lock(&calls_mu_);
  calls_mu_.Await(absl::Condition(
      +[](std::map<uint64_t, std::shared_ptr<ProcessTaskCall>>* calls) { return calls->empty(); }, &calls_));
}

void WorkerClient::ProcessTask(const proto::TaskDef& task, std::function<void(absl::Status)> done) {
  auto call = std::make_shared<ProcessTaskCall>();
  call->context.set_deadline(DeadlineIn(kProcessTaskTimeout));
  *call->request.mutable_version() = CurrentVersion();
  *call->request.mutable_task() = task;
  call->done = std::move(done);
  ProcessTaskCall* raw = call.get();
  uint64_t id = 0;
  {
    absl::MutexLock lock(&calls_mu_);
    id = next_call_++;
    calls_.emplace(id, std::move(call));
  }
  stub_->async()->ProcessTask(&raw->context, &raw->request, &raw->response,
                              [this, raw, id](grpc::Status status) {
                                raw->done(FromGrpcStatus(status));
                                std::shared_ptr<ProcessTaskCall> last;
                                {
                                  absl::MutexLock lock(&calls_mu_);
                                  last = std::move(calls_[id]);
                                }
                                // Frees the call's gRPC state here, before the destructor may return,
                                // unless the destructor holds it while cancelling (it lets go first).
                                last.reset();
                                absl::MutexLock lock(&calls_mu_);
                                calls_.erase(id);
                              });
}

}  // namespace sluice
