// Integration tests of what a read promises (issue 14): it ends normally
// only when it delivered everything its mode promises, and otherwise says
// what was lost, which dispatcher or worker did not answer, and why; and
// the `sluice` command's exit codes and messages for such reads.
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/warnings.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/service.grpc.pb.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::CommandResult;
using testing::RunCommand;
using testing::TestCluster;
using testing::WriteFile;

// Collects the reader's warnings for the test's duration.
class CapturedWarnings {
 public:
  CapturedWarnings() {
    previous_ = SetWarningSink([this](const std::string& message) {
      absl::MutexLock lock(&mu_);
      messages_.push_back(message);
    });
  }
  ~CapturedWarnings() { SetWarningSink(previous_); }
  std::vector<std::string> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }
  std::string joined() {
    std::string all;
    for (const std::string& m : messages()) absl::StrAppend(&all, m, "\n");
    return all;
  }

 private:
  WarningSink previous_;
  absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

// How a read through the SDK ended.
struct ReadOutcome {
  std::map<int64_t, int> counts;
  int64_t total = 0;
  absl::Status status;  // the first error; OK when the read ended normally
  std::chrono::milliseconds took{0};
};

// Reads `dataset` to its end or first error, calling `at(count)` after
// each element; bounded to 60 s.
ReadOutcome ReadUntilEnd(const Dataset& dataset, const std::function<void(int64_t)>& at) {
  ReadOutcome outcome;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<DatasetPtr> built = dataset.Build();
  REQUIRE(built.ok());
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*built)->MakeIterator(IteratorContext{});
  REQUIRE(iterator.ok());
  while (true) {
    REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
    Element element;
    bool end = false;
    outcome.status = (*iterator)->GetNext(&element, &end);
    if (!outcome.status.ok() || end) break;
    ++outcome.counts[element.components.at(0).data<int64_t>()[0]];
    at(++outcome.total);
  }
  outcome.took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return outcome;
}

std::string Sluice(const std::string& args) { return absl::StrCat("timeout 60 '", SLUICE_CLI, "' ", args); }

std::string WorkerAddress(TestCluster& cluster, int index) {
  const std::string port = testing::WaitForFile(cluster.dir().File(absl::StrCat("worker", index, ".port")),
                                                std::chrono::seconds(10));
  REQUIRE(!port.empty());
  return absl::StrCat("127.0.0.1:", std::stoi(port));
}

// Two workers in parallel_epochs serve range(kElements) each; worker 1 is
// killed for good once `kill_after` elements were read. Small worker
// buffers keep it from finishing its epoch before the kill.
constexpr int64_t kElements = 200000;
ReadOutcome ReadThroughLostWorker(TestCluster& cluster, bool allow_partial) {
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("parallel_epochs");
  op.set_max_outstanding_requests(8);
  op.set_allow_partial(allow_partial);
  return ReadUntilEnd(Dataset::Range(kElements).Distribute(op), [&](int64_t read) {
    if (read == 1000) cluster.KillWorker(1);
  });
}

TEST_CASE(
    "hardening read: a worker lost in parallel_epochs fails the read with DataLoss naming it and the count",
    "[service][hardening][read]") {
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--worker-timeout-ms", "1000"},
                       .worker_args = {"--buffer-elements", "8"}});
  const std::string lost = WorkerAddress(cluster, 1);
  const ReadOutcome outcome = ReadThroughLostWorker(cluster, /*allow_partial=*/false);
  INFO(outcome.status.ToString());
  REQUIRE(absl::IsDataLoss(outcome.status));
  // Worker 0's epoch arrived whole before the error.
  for (int64_t v : {int64_t{0}, kElements / 2, kElements - 1}) CHECK(outcome.counts.at(v) >= 1);
  CHECK(outcome.total < 2 * kElements);
  const std::string message(outcome.status.message());
  CHECK_THAT(message, Contains("parallel_epochs: the epoch of 1 of 2 workers ended early: worker " + lost));
  CHECK_THAT(message, Contains(" of 200000 elements;"));
  CHECK_THAT(message, Contains("elements lost. Pass --allow-partial"));
}

TEST_CASE("hardening read: allow_partial accepts a partial epoch with a warning naming the loss",
          "[service][hardening][read]") {
  CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--worker-timeout-ms", "1000"},
                       .worker_args = {"--buffer-elements", "8"}});
  const std::string lost = WorkerAddress(cluster, 1);
  const ReadOutcome outcome = ReadThroughLostWorker(cluster, /*allow_partial=*/true);
  INFO(outcome.status.ToString());
  REQUIRE(outcome.status.ok());
  CHECK(outcome.total >= kElements);
  CHECK(outcome.total < 2 * kElements);
  CHECK_THAT(warnings.joined(),
             Contains("parallel_epochs: the epoch of 1 of 2 workers ended early: worker " + lost));
  CHECK_THAT(warnings.joined(), Contains("(accepted: allow_partial)"));
}

TEST_CASE("hardening read: a dispatcher stopped for good fails the read after timeout_ms, naming it",
          "[service][hardening][read]") {
  CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 1, .worker_args = {"--buffer-elements", "8"}});
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  op.set_max_outstanding_requests(8);
  op.set_timeout_ms(2000);
  std::chrono::steady_clock::time_point stopped;
  const ReadOutcome outcome = ReadUntilEnd(Dataset::Range(kElements).Distribute(op), [&](int64_t read) {
    if (read == 100) {
      cluster.dispatcher().Terminate();
      stopped = std::chrono::steady_clock::now();
    }
  });
  INFO(outcome.status.ToString());
  REQUIRE(absl::IsUnavailable(outcome.status));
  CHECK_THAT(std::string(outcome.status.message()),
             Contains("lost the dispatcher at " + cluster.DispatcherAddress() + ": no answer for "));
  CHECK_THAT(std::string(outcome.status.message()), Contains("(timeout_ms 2000)"));
  // timeout_ms counts from the dispatcher's last answer, which came a
  // little before Terminate() returned.
  const auto after_stop = std::chrono::steady_clock::now() - stopped;
  CHECK(after_stop >= std::chrono::milliseconds(1500));
  CHECK(after_stop < std::chrono::seconds(15));
  CHECK_THAT(warnings.joined(),
             Contains("the dispatcher at " + cluster.DispatcherAddress() + " does not answer"));
}

TEST_CASE("hardening read: sluice read says the dispatcher refuses connections, within --timeout-ms",
          "[service][hardening][read][cli]") {
  testing::TempDir dir;
  const int port = testing::PickFreePort();  // nothing listens there
  const std::string path = dir.File("p.yaml");
  WriteFile(path, "pipeline:\n  - range: 3\n  - distribute: {service: \"grpc://127.0.0.1:" +
                      std::to_string(port) + "\"}\n");
  const auto start = std::chrono::steady_clock::now();
  const CommandResult result = RunCommand(Sluice(absl::StrCat("read '", path, "' --timeout-ms 1500 2>&1")));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.out, Contains("sluice: warning: the dispatcher at 127.0.0.1:" + std::to_string(port) +
                                  " does not answer yet ("));
  CHECK_THAT(result.out, Contains(absl::StrCat(
                             "p.yaml:3:5: step 2 (distribute): registering the dataset at 127.0.0.1:", port,
                             ": no answer within 1500 ms: ")));
  CHECK_THAT(result.out, Contains("Connection refused"));
  CHECK(took < std::chrono::seconds(10));
}

TEST_CASE("hardening read: definitions the service refuses exit 2 naming the distribute step's file:line",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string path = cluster.dir().File("p.yaml");
  const std::string service = "{service: \"" + cluster.ServiceUrl() + "\", ";
  struct Case {
    std::string steps;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"  - range: 10\n  - distribute: " + service + "exactly_once: true}\n",
       "p.yaml:3:5: step 2 (distribute): exactly_once needs distributed_epoch"},
      {"  - range: 10\n  - distribute: " + service + "sharding_policy: FILE}\n",
       "p.yaml:3:5: step 2 (distribute): sharding policy FILE needs the dispatcher's worker_addresses"},
      {"  - range: 10\n  - distribute: " + service + "job_name: co, num_consumers: 2, consumer_index: 0}\n",
       "p.yaml:3:5: step 2 (distribute): coordinated reads (num_consumers) need an infinite dataset"},
      {"  - range: 10\n  - distribute: " + service + "processing_mode: parallel_epochs}\n  - distribute: " +
           service + "processing_mode: parallel_epochs}\n",
       "p.yaml:4:5: step 3 (distribute): a pipeline has one distribute step at most; the first is "},
  };
  for (const Case& c : cases) {
    WriteFile(path, "pipeline:\n" + c.steps);
    const CommandResult result = RunCommand(Sluice(absl::StrCat("read '", path, "' 2>&1")));
    INFO(c.steps << result.out);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.out, Contains(c.message));
  }
}

TEST_CASE("hardening read: pointing sluice at a worker's port says it is the wrong kind of server",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string worker = WorkerAddress(cluster, 0);
  const std::string path = cluster.dir().File("p.yaml");
  WriteFile(path, "pipeline:\n  - range: 3\n");
  const CommandResult read = RunCommand(
      Sluice(absl::StrCat("read '", path, "' --service grpc://", worker, " --timeout-ms 3000 2>&1")));
  CHECK(read.exit_code == 2);
  CHECK_THAT(read.out,
             Contains("does not serve this call: is the address that of the right kind of Sluice server"));
  const CommandResult status = RunCommand(Sluice(absl::StrCat("status --service grpc://", worker, " 2>&1")));
  CHECK(status.exit_code == 1);
  CHECK_THAT(status.out, Contains("the dispatcher at " + worker +
                                  " refused GetStatus: the server there does not "
                                  "serve this call"));
}

TEST_CASE("hardening read: a finished shared job read again says so on stderr and prints nothing",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string path = cluster.dir().File("p.yaml");
  WriteFile(path, "pipeline:\n  - range: 3\n");
  const std::string read = Sluice(absl::StrCat("read '", path, "' --service ", cluster.ServiceUrl(),
                                               " --job-name shared_x --processing-mode distributed_epoch"));
  const CommandResult first = RunCommand(read);
  CHECK(first.exit_code == 0);
  CHECK(first.out == "0\n1\n2\n");
  const std::string err = cluster.dir().File("second.err");
  const CommandResult second = RunCommand(read + " 2>'" + err + "'");
  CHECK(second.exit_code == 0);
  CHECK(second.out.empty());
  CHECK_THAT(testing::ReadFileOrEmpty(err),
             Contains("sluice: warning: job 'shared_x' repetition 0 already finished: "
                      "nothing to read"));
}

// A worker registered at an address where nothing answers, heartbeating
// like a live one: its task can never be read.
class PhantomWorker {
 public:
  PhantomWorker(const std::string& dispatcher, std::string address) : address_(std::move(address)) {
    thread_ = std::thread([this, dispatcher] {
      auto stub = proto::DispatcherService::NewStub(MakeChannel(dispatcher));
      absl::MutexLock lock(&mu_);
      while (!stop_) {
        proto::WorkerHeartbeatRequest request;
        *request.mutable_version() = CurrentVersion();
        request.set_worker_address(address_);
        request.set_incarnation("phantom");
        for (int64_t task : tasks_) request.add_current_tasks(task);
        proto::WorkerHeartbeatResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
        mu_.Unlock();
        const bool ok = stub->WorkerHeartbeat(&context, request, &response).ok();
        mu_.Lock();
        if (ok) {
          for (const auto& task : response.new_tasks()) tasks_.push_back(task.task_id());
        }
        mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(400));
      }
    });
  }
  ~PhantomWorker() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

 private:
  const std::string address_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> tasks_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

TEST_CASE("hardening read: a registered worker that does not answer is reported, and reads finish without it",
          "[service][hardening][read]") {
  CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--worker-timeout-ms", "1500"}});
  const std::string phantom = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  PhantomWorker worker(cluster.DispatcherAddress(), phantom);
  cluster.WaitForRegisteredWorkers(2);

  SECTION("distributed_epoch reads every element from the worker that answers") {
    const ReadOutcome outcome = ReadUntilEnd(
        Dataset::Range(1000).Distribute(cluster.ServiceUrl(), "distributed_epoch"), [](int64_t) {});
    INFO(outcome.status.ToString());
    REQUIRE(outcome.status.ok());
    CHECK(outcome.counts.size() == 1000);
    CHECK(outcome.counts.begin()->first == 0);
    CHECK(outcome.counts.rbegin()->first == 999);
  }
  SECTION("parallel_epochs reads the live worker's epoch and reports the other as lost") {
    const ReadOutcome outcome = ReadUntilEnd(
        Dataset::Range(1000).Distribute(cluster.ServiceUrl(), "parallel_epochs"), [](int64_t) {});
    INFO(outcome.status.ToString());
    REQUIRE(absl::IsDataLoss(outcome.status));
    CHECK(outcome.total == 1000);
    CHECK_THAT(std::string(outcome.status.message()), Contains("worker " + phantom));
    CHECK_THAT(std::string(outcome.status.message()),
               Contains("after 0 of 1000 elements; 1000 elements lost"));
  }
  CHECK_THAT(warnings.joined(), Contains("worker " + phantom));
  CHECK_THAT(warnings.joined(), Contains("does not answer"));
}

}  // namespace
}  // namespace sluice
