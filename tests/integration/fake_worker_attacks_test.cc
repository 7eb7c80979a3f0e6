// Issue 32's findings 8 and 15 as a user meets them: a fake worker that
// holds the cluster token registers with a real dispatcherd (auth on, no
// real worker), is given the task of a `sluice read` in its own process,
// and answers the reader's GetElements with what an honest worker never
// sends: zstd elements that expand to 200 MiB each (8: the reader died of
// std::bad_alloc, rc 134), shared_memory_needed to a read over TCP (15: the
// reader asked again, 340 times a second, forever), and responses whose
// first_index values overlap (15: the reader delivered indices twice).
// Each read must end at once with the CLI's read-failure code and an error
// naming the worker. tests/integration/element_transport_test.cc and
// client/read/response_order_test.cc test the same refusals in-process.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cli/exit_codes.h"
#include "client/read/task_reader.h"
#include "common/proto_convert.h"
#include "service/channel_security.h"
#include "service/compression.h"
#include "service/grpc_util.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/security_helpers.h"
#include "tests/integration/test_cluster.h"
#include "tests/testing/loopback_server.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::kClientToken;
using testing::kClusterToken;
using testing::TestCluster;

// How long the fake holds an answer at most, and how long a test waits for
// the CLI to print or to exit: every wait is bounded.
constexpr absl::Duration kHoldAtMost = absl::Seconds(20);
constexpr auto kReadAtMost = std::chrono::seconds(30);

struct FakeWorkerOptions {
  // The answer to the n-th GetElements (n from 1), whatever it asked.
  std::function<proto::GetElementsResponse(int64_t n)> answer;
  // Answers wait until this many GetElements have come, so that every
  // request a reader sends at once is counted before any is answered.
  int64_t gather = 1;
  // Answers after the first wait for Release(): the test sees the first
  // one's elements delivered before any later answer reaches the reader.
  bool hold_after_first = false;
};

// A worker in this process, on a free port of 127.0.0.1: it heartbeats to
// the dispatcher with the cluster token every 100 ms (as the test cluster's
// workers do) and answers GetElements for whatever task it was given with
// `options.answer`, checking nothing. It offers no shared memory (a worker
// on another host, to the reader), so reads from it go over TCP.
class FakeWorker : public proto::WorkerService::Service {
 public:
  FakeWorker(const std::string& dispatcher, FakeWorkerOptions options)
      : options_(std::move(options)),
        dispatcher_(proto::DispatcherService::NewStub(
            MakeSecureChannel(dispatcher, ChannelSecurity{.token = kClusterToken}))) {
    int port = 0;
    server_ = testing::ServeOnLoopback(this, &port);
    address_ = absl::StrCat("127.0.0.1:", port);
    // The first heartbeat registers, before the test goes on.
    const grpc::Status registered = Heartbeat();
    INFO(registered.error_message());
    REQUIRE(registered.ok());
    heartbeats_ = std::thread([this] { HeartbeatLoop(); });
  }

  ~FakeWorker() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;  // held answers go out at once
    }
    heartbeats_.join();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  const std::string& address() const { return address_; }

  // GetElements calls so far.
  int64_t requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

  // Lets the answers held after the first go (hold_after_first).
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

  grpc::Status ProcessTask(grpc::ServerContext*, const proto::ProcessTaskRequest*,
                           proto::ProcessTaskResponse*) override {
    return grpc::Status::OK;  // the task's id is all a GetElements needs, and it is not checked
  }

  grpc::Status OpenSharedMemory(grpc::ServerContext*, const proto::OpenSharedMemoryRequest*,
                                proto::OpenSharedMemoryResponse*) override {
    return grpc::Status(grpc::FAILED_PRECONDITION, "another host");
  }

  grpc::Status GetElements(grpc::ServerContext*, const proto::GetElementsRequest*,
                           proto::GetElementsResponse* response) override {
    int64_t n = 0;
    {
      absl::MutexLock lock(&mu_);
      n = ++requests_;
      auto may_answer = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ ||
               (requests_ >= options_.gather && (!options_.hold_after_first || n == 1 || released_));
      };
      mu_.AwaitWithTimeout(absl::Condition(&may_answer), kHoldAtMost);
    }
    *response = options_.answer(n);
    return grpc::Status::OK;
  }

 private:
  grpc::Status Heartbeat() {
    proto::WorkerHeartbeatRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_worker_address(address_);
    request.set_incarnation("fake-worker");
    {
      absl::MutexLock lock(&mu_);
      for (int64_t task : tasks_) request.add_current_tasks(task);
    }
    proto::WorkerHeartbeatResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    const grpc::Status status = dispatcher_->WorkerHeartbeat(&context, request, &response);
    absl::MutexLock lock(&mu_);
    for (const proto::TaskDef& task : response.new_tasks()) tasks_.push_back(task.task_id());
    return status;
  }

  void HeartbeatLoop() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
        if (stopping_) return;
      }
      Heartbeat();  // a failed one is tried again in 100 ms, as workerd does
    }
  }

  // Constant after construction.
  const FakeWorkerOptions options_;
  const std::unique_ptr<proto::DispatcherService::Stub> dispatcher_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::thread heartbeats_;

  // State below is protected by mu_.
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> tasks_ ABSL_GUARDED_BY(mu_);
};

// A real dispatcherd with the cluster and client tokens and no worker but
// the fake, registered. Members go in reverse: the fake stops before the
// dispatcher is killed.
struct FakeWorkerCluster {
  explicit FakeWorkerCluster(FakeWorkerOptions options)
      : fake(cluster.DispatcherAddress(), std::move(options)) {
    cluster.WaitForRegisteredWorkers(1);
  }

  testing::TempDir dir;
  const std::vector<std::string> tokens = testing::TokenFlags(dir);
  // For the test's own calls to the dispatcher (registered workers).
  testing::ScopedClientSecurity client{ChannelSecurity{.token = kClientToken}};
  TestCluster cluster{{.num_workers = 0, .dispatcher_args = tokens}};
  FakeWorker fake;
};

// `sluice read` of an endless range through the service, with the client
// token, its stdout and stderr in the file read.log; killed, if still
// running, when the Process goes.
std::unique_ptr<testing::Process> StartRead(FakeWorkerCluster& setup) {
  const std::string pipeline = setup.dir.File("pipeline.yaml");
  testing::WriteFile(pipeline, "pipeline:\n  - range: 1000000\n");
  absl::StatusOr<std::unique_ptr<testing::Process>> read =
      testing::Process::Start({SLUICE_CLI, "read", pipeline, "--service", setup.cluster.ServiceUrl(),
                               "--token-file", setup.dir.File("client.token")},
                              setup.dir.File("read.log"));
  REQUIRE(read.ok());
  return *std::move(read);
}

// The read's exit code, bounded by kReadAtMost (-1 past it), and its log.
int WaitForRead(testing::Process& read, std::string* log) {
  const int code = read.Wait(kReadAtMost);
  *log = testing::ReadFileOrEmpty(read.log_path());
  return code;
}

// A clean refusal, not a crash.
void CheckNoAbort(const std::string& log) {
  CHECK_THAT(log, !Contains("terminate called"));
  CHECK_THAT(log, !Contains("bad_alloc"));
}

TEST_CASE("fake worker attacks: zstd elements of 200 MiB each fail the read naming the worker, not bad_alloc",
          "[service][security]") {
  // 200 MiB of zeros compress to a few KiB; five declare 1000 MiB, past
  // the 256 MiB a response may decompress to.
  std::string bomb;
  REQUIRE(Compress(proto::COMPRESSION_ZSTD, std::string(size_t{200} << 20, '\0'), &bomb).ok());
  CHECK(bomb.size() < 65536);
  proto::GetElementsResponse answer;
  answer.set_compression(proto::COMPRESSION_ZSTD);
  for (int i = 0; i < 5; ++i) answer.add_compressed_elements(bomb);
  FakeWorkerCluster setup(
      {.answer = [&answer](int64_t) { return answer; }, .gather = reader::kRequestsInFlightPerTask});
  std::unique_ptr<testing::Process> read = StartRead(setup);
  std::string log;
  const int code = WaitForRead(*read, &log);
  INFO(log);
  CHECK(code == cli::kExitFailure);
  const std::string& worker = setup.fake.address();
  CHECK(log == absl::StrCat("sluice: the response of worker ", worker,
                            ": GetElements response: its 5 compressed elements declare 1048576000 bytes "
                            "decompressed, past the 268435456 they may have\n"));
  CheckNoAbort(log);
  // Each request the task's fetch threads had out was refused; none asked again.
  CHECK(setup.fake.requests() == reader::kRequestsInFlightPerTask);
}

TEST_CASE(
    "fake worker attacks: shared_memory_needed answered over TCP ends the read at once naming the worker",
    "[service][security]") {
  proto::GetElementsResponse answer;
  answer.set_shared_memory_needed(int64_t{40} << 20);
  FakeWorkerCluster setup(
      {.answer = [&answer](int64_t) { return answer; }, .gather = reader::kRequestsInFlightPerTask});
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<testing::Process> read = StartRead(setup);
  std::string log;
  const int code = WaitForRead(*read, &log);
  const auto took = std::chrono::steady_clock::now() - start;
  INFO(log);
  CHECK(code == cli::kExitFailure);
  CHECK(took < std::chrono::seconds(20));
  const std::string& worker = setup.fake.address();
  CHECK(log == absl::StrCat("sluice: worker ", worker,
                            " answered shared_memory_needed (41943040 bytes) to a request that offered no "
                            "shared memory\n"));
  CheckNoAbort(log);
  // Not asked again: the requests out at once (reader::kRequestsInFlightPerTask),
  // each refused, and the reader is gone.
  CHECK(setup.fake.requests() == reader::kRequestsInFlightPerTask);
}

// `count` elements of one int64 scalar each, first_index..first_index+count-1,
// at `first_index`.
proto::GetElementsResponse Numbered(int64_t first_index, int64_t count) {
  proto::GetElementsResponse response;
  response.set_first_index(first_index);
  for (int64_t i = first_index; i < first_index + count; ++i) {
    ElementToProto(Element::Of(Tensor::Scalar<int64_t>(i)), response.add_elements());
  }
  return response;
}

TEST_CASE("fake worker attacks: responses whose first_index overlaps are DataLoss naming the worker",
          "[service][security]") {
  // Elements [0, 5), then, once those are delivered, [1, 6) to every
  // request: indices 1 to 4 handed out again.
  FakeWorkerCluster setup({.answer = [](int64_t n) { return n == 1 ? Numbered(0, 5) : Numbered(1, 5); },
                           .hold_after_first = true});
  std::unique_ptr<testing::Process> read = StartRead(setup);
  const std::string first = "0\n1\n2\n3\n4\n";
  const auto give_up = std::chrono::steady_clock::now() + kReadAtMost;
  while (testing::ReadFileOrEmpty(read->log_path()).size() < first.size() &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  setup.fake.Release();
  std::string log;
  const int code = WaitForRead(*read, &log);
  INFO(log);
  CHECK(code == cli::kExitFailure);
  // The first response's elements, once each, and none of the repeats.
  CHECK(log == absl::StrCat(first, "sluice: reading from worker ", setup.fake.address(),
                            ": a response of the task's elements [1, 6) came after elements up to index 5 "
                            "were received: a worker hands out each index once\n"));
  CheckNoAbort(log);
  // One request per fetch thread, and at most one more from the thread
  // whose answer was delivered: none after the refusal.
  CHECK(setup.fake.requests() >= 2);
  CHECK(setup.fake.requests() <= reader::kRequestsInFlightPerTask + 1);
}

}  // namespace
}  // namespace sluice
