#include "service/worker_client.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "service/grpc_util.h"
#include "tests/testing/loopback_server.h"

namespace sluice {
namespace {

// A worker that notes the protocol version of every call, and answers
// ProcessTask only for task ids below `hold_from`: later ones wait for the
// caller's deadline.
class VersionRecordingWorker : public proto::WorkerService::Service {
 public:
  explicit VersionRecordingWorker(int64_t hold_from = 1 << 30) : hold_from_(hold_from) {}

  grpc::Status GetElements(grpc::ServerContext*, const proto::GetElementsRequest* request,
                           proto::GetElementsResponse* response) override {
    Note("GetElements", request->version());
    response->set_end_of_sequence(true);
    return grpc::Status::OK;
  }
  grpc::Status OpenSharedMemory(grpc::ServerContext*, const proto::OpenSharedMemoryRequest* request,
                                proto::OpenSharedMemoryResponse* response) override {
    Note("OpenSharedMemory", request->version());
    response->set_unavailable("not on this worker");
    return grpc::Status::OK;
  }
  grpc::Status ProcessTask(grpc::ServerContext* context, const proto::ProcessTaskRequest* request,
                           proto::ProcessTaskResponse*) override {
    Note("ProcessTask", request->version());
    if (request->task().task_id() < hold_from_) return grpc::Status::OK;
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return grpc::Status(grpc::StatusCode::CANCELLED, "gave up");
  }

  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Note(const std::string& rpc, const proto::VersionInfo& version) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(rpc + " v" + std::to_string(version.protocol_version()));
  }

  const int64_t hold_from_;
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

TEST_CASE("WorkerClient stamps every call to a worker with the protocol version",
          "[service][worker_client]") {
  VersionRecordingWorker worker;
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::ServeOnLoopback(&worker, &port);
  WorkerClient client("127.0.0.1:" + std::to_string(port), /*connections=*/2);
  CHECK(client.address() == "127.0.0.1:" + std::to_string(port));

  proto::GetElementsRequest request;
  request.set_task_id(7);
  grpc::ByteBuffer bytes;
  REQUIRE(client.GetElements(request, &bytes).ok());
  proto::GetElementsResponse response;
  std::vector<grpc::Slice> slices;
  REQUIRE(bytes.Dump(&slices).ok());
  std::string joined;
  for (const grpc::Slice& slice : slices)
    joined.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  REQUIRE(response.ParseFromString(joined));
  CHECK(response.end_of_sequence());

  proto::OpenSharedMemoryResponse offer;
  REQUIRE(client.OpenSharedMemory({}, &offer).ok());
  CHECK(offer.unavailable() == "not on this worker");

  proto::TaskDef task;
  task.set_task_id(1);
  absl::Notification pushed;
  absl::Status push_status = absl::UnknownError("not called");
  client.ProcessTask(task, [&](absl::Status status) {
    push_status = status;
    pushed.Notify();
  });
  REQUIRE(pushed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  CHECK(push_status.ok());

  const std::string v = " v" + std::to_string(kProtocolVersion);
  CHECK(worker.calls() ==
        std::vector<std::string>{"GetElements" + v, "OpenSharedMemory" + v, "ProcessTask" + v});
}

TEST_CASE(
    "WorkerClient's ProcessTask returns at once and ends at its deadline when the worker does not answer",
    "[service][worker_client]") {
  VersionRecordingWorker worker(/*hold_from=*/100);
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::ServeOnLoopback(&worker, &port);
  // Declared before the client, which outlives no callback of its calls.
  absl::Notification done;
  absl::Status status;
  WorkerClient client("127.0.0.1:" + std::to_string(port));
  proto::TaskDef task;
  task.set_task_id(100);
  const auto start = std::chrono::steady_clock::now();
  client.ProcessTask(task, [&](absl::Status s) {
    status = s;
    done.Notify();
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  REQUIRE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(absl::IsDeadlineExceeded(status));
  CHECK(waited >= kProcessTaskTimeout - std::chrono::milliseconds(100));
  CHECK(waited < kProcessTaskTimeout + std::chrono::seconds(3));
}

TEST_CASE("destroying a WorkerClient cancels its ProcessTask calls in flight and waits for their callbacks",
          "[service][worker_client]") {
  VersionRecordingWorker worker(/*hold_from=*/100);
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::ServeOnLoopback(&worker, &port);
  absl::Notification answered, held;
  absl::Status answered_status = absl::UnknownError("not called"),
               held_status = absl::UnknownError("not called");
  auto client = std::make_unique<WorkerClient>("127.0.0.1:" + std::to_string(port));
  proto::TaskDef task;
  task.set_task_id(1);
  client->ProcessTask(task, [&](absl::Status s) {
    answered_status = s;
    answered.Notify();
  });
  REQUIRE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  task.set_task_id(100);
  client->ProcessTask(task, [&](absl::Status s) {
    held_status = s;
    held.Notify();
  });
  // The held call reached the worker, which now waits for its deadline.
  for (int i = 0; i < 500 && worker.calls().size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(worker.calls().size() == 2);
  const auto start = std::chrono::steady_clock::now();
  client.reset();
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(held.HasBeenNotified());
  CHECK(absl::IsCancelled(held_status));
  CHECK(answered_status.ok());
  // Cancelled, not waited out: the deadline is 2 s away.
  CHECK(took < kProcessTaskTimeout / 2);
}

TEST_CASE("WorkerClient's calls to an address where nothing listens are Unavailable",
          "[service][worker_client]") {
  int port = 0;
  {
    VersionRecordingWorker worker;
    std::unique_ptr<grpc::Server> server = testing::ServeOnLoopback(&worker, &port);
    server->Shutdown();
  }
  WorkerClient client("127.0.0.1:" + std::to_string(port));
  grpc::ByteBuffer bytes;
  CHECK(absl::IsUnavailable(client.GetElements({}, &bytes)));
  proto::OpenSharedMemoryResponse offer;
  CHECK(absl::IsUnavailable(client.OpenSharedMemory({}, &offer)));
}

}  // namespace sluice
