// Integration tests of failures: dispatcher kill -9 and restart from its
// work dir, a damaged journal, workers killed, restarted or shut down while
// a client reads. Real daemons on 127.0.0.1 (test_cluster.h).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "client/dataset_internal.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using testing::TestCluster;

using testing::ReadCounts;

std::map<int64_t, int> Expected(int64_t n, int copies) {
  std::map<int64_t, int> counts;
  for (int64_t i = 0; i < n; ++i) counts[i] = copies;
  return counts;
}

// Values of 0..n-1 that were never read.
std::vector<int64_t> Missing(const std::map<int64_t, int>& counts, int64_t n) {
  std::vector<int64_t> missing;
  for (int64_t i = 0; i < n; ++i) {
    if (!counts.contains(i)) missing.push_back(i);
  }
  return missing;
}

int64_t Total(const std::map<int64_t, int>& counts) {
  int64_t total = 0;
  for (const auto& [value, count] : counts) total += count;
  return total;
}

proto::StatusSnapshot DispatcherStatus(TestCluster& cluster) {
  auto stub = proto::DispatcherService::NewStub(MakeChannel(cluster.DispatcherAddress()));
  proto::GetStatusRequest request;
  *request.mutable_version() = CurrentVersion();
  proto::StatusSnapshot snapshot;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  REQUIRE(stub->GetStatus(&context, request, &snapshot).ok());
  return snapshot;
}

TEST_CASE("resilience: a client reads through three dispatcher kill -9s in one epoch, losing nothing",
          "[service][resilience]") {
  constexpr int64_t kElements = 12000;
  ProcessingMode mode = ProcessingMode::kDistributedEpoch;
  int copies = 1;
  SECTION("distributed_epoch") {}
  SECTION("parallel_epochs") {
    mode = ProcessingMode::kParallelEpochs;
    copies = 2;  // every worker runs the whole dataset
  }
  testing::TempDir work;
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--work-dir", work.path()},
                       .worker_args = {"--buffer-elements", "8"}});
  const Dataset dataset = Dataset::Range(kElements).ReadFromService(
      {.service = cluster.ServiceUrl(), .processing_mode = mode, .max_outstanding_requests = 8});
  const int64_t total = kElements * copies;
  int restarts = 0;
  const std::map<int64_t, int> counts = ReadCounts(dataset, [&](int64_t read) {
    if (read == total / 10 || read == total * 4 / 10 || read == total * 7 / 10) {
      cluster.RestartDispatcher();
      ++restarts;
    }
  });
  CHECK(restarts == 3);
  CHECK(counts == Expected(kElements, copies));
  // The restarted dispatcher knows both workers without their registering
  // anew, and the job it recovered.
  proto::StatusSnapshot status = DispatcherStatus(cluster);
  CHECK(status.workers_size() == 2);
  CHECK(status.jobs_size() == 1);
  CHECK(status.iterations_size() == 1);
  CHECK(status.iterations(0).finished());
}

TEST_CASE("resilience: a torn journal tail is cut with a warning, a corrupt middle stops dispatcherd",
          "[service][resilience]") {
  testing::TempDir work;
  TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--work-dir", work.path()}});
  const Dataset named =
      Dataset::Range(10).ReadFromService({.service = cluster.ServiceUrl(),
                                          .processing_mode = ProcessingMode::kDistributedEpoch,
                                          .job_name = "kept"});
  REQUIRE(named.Collect().ok());

  // The newest journal file is the one being appended to.
  auto newest_journal = [&] {
    std::string newest;
    for (const auto& entry : std::filesystem::directory_iterator(work.path())) {
      const std::string name = entry.path().filename();
      if (name.starts_with("journal-") && entry.path().string() > newest) newest = entry.path().string();
    }
    return newest;
  };
  const std::string journal = newest_journal();
  const auto size = std::filesystem::file_size(journal);
  REQUIRE(size > 8);
  // A record whose write was cut short: the first record's header and 4
  // bytes of its payload, as if the dispatcher died writing a copy of it.
  const std::string first_record = testing::ReadFileOrEmpty(journal).substr(8, 12);
  { std::ofstream(journal, std::ios::app | std::ios::binary) << first_record; }
  cluster.RestartDispatcher();
  const std::string log = testing::ReadFileOrEmpty(cluster.dir().File("dispatcher.1.log"));
  CHECK_THAT(log, Catch::Matchers::Contains(journal + ": torn record at byte " + std::to_string(size)));
  CHECK_THAT(log, Catch::Matchers::Contains("truncated, 12 bytes dropped"));
  // Nothing before the torn record was lost: the named job is still there.
  CHECK(DispatcherStatus(cluster).jobs_size() == 1);
  // The same trainer's next epoch: repetition 1 of the job kept.
  REQUIRE(named.Collect().ok());
  CHECK(DispatcherStatus(cluster).jobs_size() == 1);

  // Damage in the first record of a journal with more after it.
  const std::string damaged = newest_journal();
  REQUIRE(std::filesystem::file_size(damaged) > 40);
  {
    std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(20);
    file.put('\x7f');
  }
  cluster.dispatcher().Kill();
  testing::CommandResult result =
      testing::RunCommand(std::string(SLUICE_DISPATCHERD) + " --port 0 --bind-address 127.0.0.1 --work-dir " +
                          work.path() + " 2>&1");
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.out,
             Catch::Matchers::Contains("dispatcherd: " + damaged + ": byte 8: record checksum mismatch"));
  // The damaged file is left as it was, for a person to look at.
  CHECK(std::filesystem::exists(damaged));
}

// Two workers serve range(kElements) in distributed_epoch; `act` breaks
// something once a quarter has been read. What was read, the dispatcher's
// status after, and what a following parallel_epochs read of range(100)
// gets (100 per worker serving).
struct WorkerFailureRun {
  static constexpr int64_t kElements = 12000;
  std::map<int64_t, int> counts;
  proto::StatusSnapshot status;
  std::string worker0;
  int64_t next_epoch = 0;
};
WorkerFailureRun ReadThroughWorkerFailure(const std::string& worker_timeout_ms,
                                          const std::function<void(TestCluster&)>& act,
                                          bool exactly_once = false) {
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--worker-timeout-ms", worker_timeout_ms},
                       .worker_args = {"--buffer-elements", "8"}});
  const int64_t n = WorkerFailureRun::kElements;
  WorkerFailureRun run;
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  op.set_max_outstanding_requests(8);
  op.set_exactly_once(exactly_once);
  // map and filter before distribute keep the worker side element-wise.
  run.counts = ReadCounts(
      internal::ReadFromService(
          Dataset::Range(n).Map("add", {{"value", 0}}).Filter("greater_equal", {{"value", 0}}), op),
      [&](int64_t read) {
        if (read == n / 4) act(cluster);
      });
  run.status = DispatcherStatus(cluster);
  run.worker0 =
      "127.0.0.1:" + std::to_string(std::stoi(testing::ReadFileOrEmpty(cluster.dir().File("worker0.port"))));
  run.next_epoch = Total(
      ReadCounts(Dataset::Range(100).ReadFromService({.service = cluster.ServiceUrl()}), [](int64_t) {}));
  return run;
}

int TasksOn(const proto::StatusSnapshot& status, const std::string& address) {
  int tasks = 0;
  for (const auto& task : status.tasks()) tasks += task.worker_address() == address;
  return tasks;
}

TEST_CASE("resilience: a worker kill -9 mid-epoch loses no element", "[service][resilience]") {
  const WorkerFailureRun run = ReadThroughWorkerFailure("1500", [](TestCluster& c) { c.KillWorker(0); });
  CHECK(Missing(run.counts, WorkerFailureRun::kElements).empty());
  // At least once: what the lost worker had leased is read again.
  CHECK(Total(run.counts) >= WorkerFailureRun::kElements);
  CHECK(run.status.workers_size() == 1);
  CHECK(run.next_epoch == 100);
}

TEST_CASE("resilience: a worker shut down mid-read hands its splits on at once", "[service][resilience]") {
  const auto start = std::chrono::steady_clock::now();
  // Only the shutdown message can end the task within the test's time.
  const WorkerFailureRun run =
      ReadThroughWorkerFailure("600000", [](TestCluster& c) { CHECK(c.worker(0).Terminate() == 0); });
  CHECK(Missing(run.counts, WorkerFailureRun::kElements).empty());
  CHECK(Total(run.counts) >= WorkerFailureRun::kElements);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
  CHECK(run.next_epoch == 100);
}

TEST_CASE("resilience: a worker restarted at its address re-registers and gets tasks again",
          "[service][resilience]") {
  const WorkerFailureRun run = ReadThroughWorkerFailure("600000", [](TestCluster& c) { c.RestartWorker(0); });
  CHECK(Missing(run.counts, WorkerFailureRun::kElements).empty());
  // Its old task was lost at once (a new process, not a timeout), and the
  // restarted worker took a new one; a new epoch runs on both workers.
  CHECK(TasksOn(run.status, run.worker0) == 2);
  CHECK(run.next_epoch == 200);
}

TEST_CASE("resilience: with exactly_once a worker kill -9 mid-epoch yields each element once",
          "[service][resilience]") {
  const WorkerFailureRun run = ReadThroughWorkerFailure(
      "1500", [](TestCluster& c) { c.KillWorker(0); }, true);
  CHECK(run.counts == Expected(WorkerFailureRun::kElements, 1));
  CHECK(run.next_epoch == 100);
}

TEST_CASE("resilience: an endless read waits out the loss of its only worker for the next one",
          "[service][resilience]") {
  TestCluster cluster({.num_workers = 1,
                       .dispatcher_args = {"--worker-timeout-ms", "1000"},
                       .worker_args = {"--buffer-elements", "8"}});
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  // Small responses, few in flight: most of the 3000 come after the kill.
  op.set_max_outstanding_requests(2);
  // Splits of an endless dataset are not leased, so the lost task returns
  // none: the iteration must still go on, not end as if read whole.
  const std::map<int64_t, int> counts =
      ReadCounts(internal::ReadFromService(Dataset::Range(1000).Repeat(), op).Take(3000), [&](int64_t read) {
        if (read != 500) return;
        cluster.KillWorker(0);
        cluster.WaitForRegisteredWorkers(0);
        cluster.AddWorker();
      });
  CHECK(Total(counts) == 3000);
  const proto::StatusSnapshot status = DispatcherStatus(cluster);
  // The lost task, and the one the new worker got.
  REQUIRE(status.tasks_size() == 2);
  CHECK(status.tasks(0).worker_address() != status.tasks(1).worker_address());
  CHECK(status.workers_size() == 1);
}

TEST_CASE("resilience: exactly_once on a pipeline it cannot serve is FailedPrecondition",
          "[service][resilience]") {
  TestCluster cluster({.num_workers = 1});
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  op.set_exactly_once(true);
  // Refused when the job is made, with the first iterator.
  absl::StatusOr<DatasetPtr> built =
      internal::BuildPipeline(internal::ReadFromService(Dataset::Range(10).Batch(2).Batch(2), op));
  REQUIRE(built.ok());
  const absl::Status status = (*built)->MakeIterator(IteratorContext()).status();
  REQUIRE(absl::IsFailedPrecondition(status));
  CHECK(status.message() ==
        "exactly_once"
        " runs the worker side once per split, so that every element comes from one split and is the same on "
        "every run; it takes a splittable source, then map, filter, tokenize, pack_sequences, prefetch and "
        "at most one batch "
        "or "
        "padded_batch (docs/pipeline.md): step "
        "3 is a second batch: batch again after distribute");
}

TEST_CASE("resilience: static DATA sharding over the dispatcher's worker list reads each element once",
          "[service][resilience]") {
  const int first = testing::PickFreePort();
  int second = testing::PickFreePort();
  while (second == first) second = testing::PickFreePort();
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--worker-addresses", "127.0.0.1:" + std::to_string(first),
                                           "--worker-addresses", "127.0.0.1:" + std::to_string(second)},
                       .worker_ports = {first, second}});
  testing::WriteFile(cluster.dir().File("data.yaml"), "pipeline:\n  - range: 20\n");
  testing::CommandResult result =
      testing::RunCommand(std::string(SLUICE_CLI) + " read " + cluster.dir().File("data.yaml") +
                          " --service " + cluster.ServiceUrl() + " --sharding-policy DATA 2>&1");
  REQUIRE(result.exit_code == 0);
  std::map<int64_t, int> counts;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) ++counts[std::stoll(line)];
  CHECK(counts == Expected(20, 1));
  // Without sharding, both workers run all of it.
  CHECK(Total(ReadCounts(Dataset::Range(20).ReadFromService({.service = cluster.ServiceUrl()}),
                         [](int64_t) {})) == 40);

  // FILE sharding of 1 file over 2 workers cannot be served.
  testing::WriteFile(cluster.dir().File("files.yaml"), "pipeline:\n  - tfrecord: {files: [only.tfrecord]}\n");
  result = testing::RunCommand(std::string(SLUICE_CLI) + " read " + cluster.dir().File("files.yaml") +
                               " --service " + cluster.ServiceUrl() + " --sharding-policy FILE 2>&1");
  CHECK(result.exit_code != 0);
  CHECK_THAT(result.out, Catch::Matchers::Contains(
                             "FILE sharding over 2 workers needs at least as many files; tfrecord reads 1"));
}

// Every file of `dir` with its contents.
std::map<std::string, std::string> DirContents(const std::string& dir) {
  std::map<std::string, std::string> contents;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    contents[entry.path().filename()] = testing::ReadFileOrEmpty(entry.path().string());
  }
  return contents;
}

TEST_CASE("resilience: a second dispatcherd on a work dir in use exits 2 and leaves it as it was",
          "[service][resilience]") {
  testing::TempDir work;
  TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--work-dir", work.path()}});
  REQUIRE(Dataset::Range(3)
              .ReadFromService({.service = cluster.ServiceUrl(), .job_name = "kept"})
              .Collect()
              .ok());
  const std::map<std::string, std::string> before = DirContents(work.path());
  REQUIRE(before.contains("LOCK"));
  // On the same port (what a restart script run twice does) and on another.
  const std::string port = cluster.DispatcherAddress().substr(cluster.DispatcherAddress().rfind(':') + 1);
  for (const std::string& second_port : {port, std::string("0")}) {
    INFO("--port " << second_port);
    const std::string log = cluster.dir().File("second.log");
    auto second = testing::Process::Start(
        {SLUICE_DISPATCHERD, "--port", second_port, "--bind-address", "127.0.0.1", "--work-dir", work.path()},
        log);
    REQUIRE(second.ok());
    CHECK((*second)->Wait(std::chrono::seconds(20)) == 2);
    CHECK_THAT(testing::ReadFileOrEmpty(log),
               Catch::Matchers::Contains("dispatcherd: work dir " + work.path() +
                                         " is in use by another dispatcherd (pid ") &&
                   Catch::Matchers::Contains("give each dispatcher its own --work-dir"));
    CHECK(DirContents(work.path()) == before);
  }
  // The first one still serves, and a restart (kill -9) recovers its
  // journal and takes the lock again.
  CHECK(Total(ReadCounts(Dataset::Range(4).ReadFromService({.service = cluster.ServiceUrl()}),
                         [](int64_t) {})) == 4);
  cluster.RestartDispatcher();
  CHECK(Total(ReadCounts(Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl()}),
                         [](int64_t) {})) == 5);
}

}  // namespace
}  // namespace sluice
