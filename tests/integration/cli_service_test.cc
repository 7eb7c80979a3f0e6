// Integration tests of the sluice command against real dispatcherd and
// workerd processes (see test_cluster.h): status, bench, and read and bench
// with --replicas.
#include <catch2/catch.hpp>
#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.pb.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Equals;
using Catch::Matchers::Matches;
using Catch::Matchers::StartsWith;
using testing::CommandResult;
using testing::RunCommand;
using testing::TestCluster;
using testing::WriteFile;

// The sluice command line, killed after 60 s so that no test hangs.
std::string Sluice(const std::string& args) { return absl::StrCat("timeout 60 '", SLUICE_CLI, "' ", args); }

std::string WorkerAddress(TestCluster& cluster, int index) {
  const std::string port = testing::WaitForFile(cluster.dir().File(absl::StrCat("worker", index, ".port")),
                                                std::chrono::seconds(10));
  REQUIRE(!port.empty());
  return absl::StrCat("127.0.0.1:", std::stoi(port));
}

// Heartbeat ages change from run to run.
std::string WithoutAges(const std::string& tables) {
  return std::regex_replace(tables, std::regex("[0-9]+\\.[0-9] s ago"), "AGE");
}

// Reads `pipeline` (YAML text) through the service with `sluice read`.
CommandResult ReadThrough(TestCluster& cluster, const std::string& pipeline, const std::string& flags) {
  const std::string path = cluster.dir().File("pipeline.yaml");
  WriteFile(path, pipeline);
  return RunCommand(Sluice(absl::StrCat("read '", path, "' --service ", cluster.ServiceUrl(), " ", flags)));
}

TEST_CASE("cli service: status shows the workers, then the dataset, job and task of a read",
          "[service][cli]") {
  TestCluster cluster({.num_workers = 1, .worker_args = {"--tags", "rack-a", "--tags", "ssd"}});
  const std::string worker = WorkerAddress(cluster, 0);
  const std::string status = Sluice("status --service " + cluster.ServiceUrl());
  // The same before and after the read: the worker has no unfinished task.
  const std::string workers =
      absl::StrCat("dispatcher: ", cluster.DispatcherAddress(), "\n\nworkers: 1\n",
                   absl::StrFormat("  %-*s  TAGS        TASKS  LAST HEARTBEAT\n", worker.size(), "ADDRESS"),
                   "  ", worker, "  rack-a,ssd  -      AGE\n\n");
  CommandResult result = RunCommand(status);
  CHECK(result.exit_code == 0);
  CHECK_THAT(WithoutAges(result.out),
             Equals(workers + "datasets: 0\n\njobs: 0\n\niterations: 0\n\ntasks: 0\n"));

  result = ReadThrough(cluster, "pipeline:\n  - range: 3\n", "--job-name train");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Equals("0\n1\n2\n"));

  result = RunCommand(status);
  CHECK(result.exit_code == 0);
  CHECK_THAT(WithoutAges(result.out), Equals(absl::StrCat(workers,
                                                          "datasets: 1\n"
                                                          "  ID    FINGERPRINT\n"
                                                          "  1000  ",
                                                          Dataset::Range(3).Fingerprint(),
                                                          "\n"
                                                          "\n"
                                                          "jobs: 1\n"
                                                          "  ID  DATASET  MODE             NAME\n"
                                                          "  1   1000     parallel_epochs  train\n"
                                                          "\n"
                                                          "iterations: 1\n"
                                                          "  ID  JOB  REPETITION  CLIENTS  STATE\n"
                                                          "  1   1    0           0        finished\n"
                                                          "\n"
                                                          "tasks: 1\n"
                                                          "  ID  ITERATION  WORKER\n"
                                                          "  1   1          ",
                                                          worker, "\n")));
}

TEST_CASE("cli service: status --json is one object with the dispatcher's values", "[service][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string worker = WorkerAddress(cluster, 0);
  CommandResult result = ReadThrough(cluster, "pipeline:\n  - range: 4\n",
                                     "--job-name shared --processing-mode distributed_epoch");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Equals("0\n1\n2\n3\n"));

  const auto before_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  result = RunCommand(Sluice("status --json --service " + cluster.ServiceUrl()));
  CHECK(result.exit_code == 0);
  // One line, one object.
  REQUIRE(result.out.size() > 2);
  CHECK(result.out.front() == '{');
  CHECK(result.out.find('\n') == result.out.size() - 1);
  proto::StatusSnapshot snapshot;
  INFO(result.out);
  REQUIRE(google::protobuf::util::JsonStringToMessage(result.out, &snapshot).ok());
  REQUIRE(snapshot.workers_size() == 1);
  CHECK(snapshot.workers(0).address() == worker);
  CHECK(snapshot.workers(0).tags_size() == 0);
  CHECK(snapshot.workers(0).tasks_size() == 0);
  // Workers heartbeat every 100 ms in TestCluster.
  CHECK(snapshot.workers(0).last_heartbeat_unix_ms() > before_ms - 5000);
  CHECK(snapshot.workers(0).last_heartbeat_unix_ms() < before_ms + 60000);
  REQUIRE(snapshot.datasets_size() == 1);
  CHECK(snapshot.datasets(0).dataset_id() == "1000");
  CHECK(snapshot.datasets(0).fingerprint() == Dataset::Range(4).Fingerprint());
  REQUIRE(snapshot.jobs_size() == 1);
  CHECK(snapshot.jobs(0).job_id() == 1);
  CHECK(snapshot.jobs(0).params().dataset_id() == "1000");
  CHECK(snapshot.jobs(0).params().processing_mode() == proto::DISTRIBUTED_EPOCH);
  CHECK(snapshot.jobs(0).params().job_name() == "shared");
  REQUIRE(snapshot.iterations_size() == 1);
  CHECK(snapshot.iterations(0).iteration_id() == 1);
  CHECK(snapshot.iterations(0).job_id() == 1);
  CHECK(snapshot.iterations(0).repetition() == 0);
  CHECK(snapshot.iterations(0).finished());
  CHECK(snapshot.iterations(0).num_clients() == 0);
  CHECK_FALSE(snapshot.iterations(0).collected());
  REQUIRE(snapshot.tasks_size() == 1);
  CHECK(snapshot.tasks(0).task_id() == 1);
  CHECK(snapshot.tasks(0).iteration_id() == 1);
  CHECK(snapshot.tasks(0).worker_address() == worker);
  // Every field is there, zeros and empty lists included, under its proto
  // name; only the heartbeat time changes from run to run, and the
  // autoscaling advice, there once the dispatcher has evaluated it. A
  // task's read_secret is never in a status (it is given with a heartbeat
  // only).
  CHECK_THAT(
      std::regex_replace(std::regex_replace(result.out, std::regex(",\"scaling\":\\{[^}]*\\}"), ""),
                         std::regex("\"last_heartbeat_unix_ms\":\"[0-9]+\""),
                         "\"last_heartbeat_unix_ms\":\"T\""),
      Equals(absl::StrCat(
          R"({"workers":[{"address":")", worker,
          R"(","tags":[],"tasks":[],"last_heartbeat_unix_ms":"T","draining":false}],)"
          R"("datasets":[{"dataset_id":"1000","fingerprint":")",
          Dataset::Range(4).Fingerprint(),
          R"("}],"jobs":[{"job_id":"1","params":{"dataset_id":"1000",)"
          R"("processing_mode":"DISTRIBUTED_EPOCH","job_name":"shared",)"
          R"("sharding_policy":"SHARDING_DYNAMIC","static_workers":[],"exactly_once":false,"num_consumers":"0","deterministic":false,"tenant":"","cross_trainer_cache_bytes":"0"}}],)"
          R"("iterations":[{"iteration_id":"1","job_id":"1","repetition":"0",)"
          R"("finished":true,"num_clients":"0","collected":false,"held_splits":"0","awaiting_reports":"0"}],)"
          R"("tasks":[{"task_id":"1","iteration_id":"1","worker_address":")",
          worker, "\",\"starting_round\":\"0\",\"read_secret\":\"\"}]}\n")));
}

TEST_CASE("cli service: status of an unreachable dispatcher fails within --timeout-ms", "[service][cli]") {
  const int port = testing::PickFreePort();  // nothing listens there
  const auto start = std::chrono::steady_clock::now();
  CommandResult result =
      RunCommand(Sluice(absl::StrCat("status --service grpc://127.0.0.1:", port, " --timeout-ms 1000 2>&1")));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.out,
             Equals(absl::StrCat("sluice: no dispatcher answered at 127.0.0.1:", port, " within 1000 ms\n")));
}

// The bench summary's lines, with the figures that depend on the clock as
// patterns; the rates must be positive.
void CheckBenchSummary(const std::string& summary, const std::string& first_line, const std::string& end,
                       int64_t batches, int64_t elements, int64_t bytes) {
  std::vector<std::string> lines = absl::StrSplit(summary, '\n');
  const std::string positive = "[0-9]*[1-9][0-9]*\\.[0-9]+|[0-9]+\\.[0-9]*[1-9][0-9]*";
  size_t i = 0;
  if (!first_line.empty()) CHECK(lines.at(i++) == first_line);
  REQUIRE(lines.size() == i + (batches > 0 ? 7 : 6));
  CHECK_THAT(lines[i++], Matches("time:      [0-9]+\\.[0-9]{2} s \\(" + end + "\\)"));
  CHECK_THAT(lines[i++], Matches(absl::StrCat("batches:   ", batches, " \\((", positive, ") batches/s\\)")));
  CHECK_THAT(lines[i++],
             Matches(absl::StrCat("elements:  ", elements, " \\((", positive, ") elements/s\\)")));
  CHECK_THAT(lines[i++], Matches(absl::StrCat("bytes:     ", bytes, " \\([0-9]+\\.[0-9]{2} MB/s\\)")));
  CHECK_THAT(lines[i++],
             Matches("waiting:   [0-9]+\\.[0-9]{2} s in GetNext \\([0-9]+\\.[0-9]% of wall time\\)"));
  if (batches > 0) CHECK_THAT(lines[i++], Matches("first:     [0-9]+\\.[0-9]{3} s to the first batch"));
  CHECK(lines[i] == "");
}

TEST_CASE("cli service: bench reads a finite pipeline to its end, before --seconds", "[service][cli]") {
  TestCluster cluster({.num_workers = 2});
  const std::string path = cluster.dir().File("bench.yaml");
  WriteFile(path,
            "pipeline:\n  - range: 1000\n  - distribute: {processing_mode: distributed_epoch}\n"
            "  - batch: {batch_size: 100}\n");
  const auto start = std::chrono::steady_clock::now();
  CommandResult result = RunCommand(
      Sluice(absl::StrCat("bench '", path, "' --service ", cluster.ServiceUrl(), " --seconds 50")));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  CHECK(result.exit_code == 0);
  // Not a terminal: no progress line.
  CHECK(result.out.find('\r') == std::string::npos);
  CheckBenchSummary(result.out, "", "end of input", 10, 1000, 8000);
}

TEST_CASE("cli service: bench of an endless job stops at --seconds", "[service][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string path = cluster.dir().File("bench.yaml");
  WriteFile(path, "pipeline:\n  - range: 1000\n  - repeat\n  - batch: {batch_size: 10}\n");
  const auto start = std::chrono::steady_clock::now();
  CommandResult result =
      RunCommand(Sluice(absl::StrCat("bench '", path, "' --service ", cluster.ServiceUrl(), " --seconds 1")));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  CHECK(result.exit_code == 0);
  std::vector<std::string> lines = absl::StrSplit(result.out, '\n');
  REQUIRE(lines.size() == 7);
  CHECK_THAT(lines[0], Matches("time:      1\\.[0-9]{2} s \\(time limit\\)"));
  CHECK_THAT(lines[5], Matches("first:     0\\.[0-9]{3} s to the first batch"));
  // Rows of batches of 10.
  int64_t batches = 0, elements = 0;
  REQUIRE(std::sscanf(lines[1].c_str(), "batches:   %ld", &batches) == 1);
  REQUIRE(std::sscanf(lines[2].c_str(), "elements:  %ld", &elements) == 1);
  CHECK(batches > 0);
  CHECK(elements == 10 * batches);
  CHECK_THAT(lines[3], StartsWith(absl::StrCat("bytes:     ", 80 * batches, " (")));
}

TEST_CASE("cli service: read --replicas prints one JSON object per step", "[service][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string pipeline =
      "pipeline:\n  - from_tensor_slices: [1, 2, 3, 4]\n  - repeat\n  - batch: {batch_size: 4}\n";
  CommandResult result = ReadThrough(cluster, pipeline, "--replicas CPU:0,CPU:1 --limit 1");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Equals("{\"CPU:0\": [1, 2], \"CPU:1\": [3, 4]}\n"));

  result = ReadThrough(cluster, pipeline, "--replicas CPU:0,CPU:1,CPU:2,CPU:3 --limit 2");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Equals("{\"CPU:0\": [1], \"CPU:1\": [2], \"CPU:2\": [3], \"CPU:3\": [4]}\n"
                                "{\"CPU:0\": [1], \"CPU:1\": [2], \"CPU:2\": [3], \"CPU:3\": [4]}\n"));

  // A finite input: the last, partial batch leaves the later replica empty.
  result =
      ReadThrough(cluster, "pipeline:\n  - range: 6\n  - batch: {batch_size: 4}\n", "--replicas CPU:0,CPU:1");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Equals("{\"CPU:0\": [0, 1], \"CPU:1\": [2, 3]}\n"
                                "{\"CPU:0\": [4, 5], \"CPU:1\": []}\n"));
}

TEST_CASE("cli service: read --replicas --global-batch-size splits elements that are not batched",
          "[service][cli]") {
  TestCluster cluster({.num_workers = 1});
  // Each element is a [2, 2] tensor already: no batch step to read 2 from.
  const std::string pipeline = "pipeline:\n  - from_tensors: [[1, 2], [3, 4]]\n  - repeat: 2\n";
  CommandResult result = ReadThrough(cluster, pipeline, "--replicas CPU:0,CPU:1 --global-batch-size 2");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Equals("{\"CPU:0\": [[1, 2]], \"CPU:1\": [[3, 4]]}\n"
                                "{\"CPU:0\": [[1, 2]], \"CPU:1\": [[3, 4]]}\n"));
  result = ReadThrough(cluster, pipeline, "--replicas CPU:0,CPU:1 2>&1");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.out,
             Equals("sluice: DistributeDataset needs the global batch size: the pipeline has no batch "
                    "step; set DistributeOptions::global_batch_size (sluice: --global-batch-size)\n"));
}

TEST_CASE("cli service: read --replicas refuses a device it does not know with exit 2", "[service][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string path = cluster.dir().File("pipeline.yaml");
  WriteFile(path, "pipeline:\n  - range: 8\n  - batch: {batch_size: 4}\n");
  CommandResult result = RunCommand(Sluice(
      absl::StrCat("read '", path, "' --service ", cluster.ServiceUrl(), " --replicas CPU:0,TPU:1 2>&1")));
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.out, Equals("sluice: device 'TPU:1' is not CPU:N, GPU:N or cuda:N\n"));
}

TEST_CASE("cli service: bench --replicas counts steps and the rows of every replica", "[service][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string path = cluster.dir().File("bench.yaml");
  WriteFile(path,
            "pipeline:\n  - from_tensor_slices: [1, 2, 3, 4]\n  - repeat: 3\n  - batch: {batch_size: 4}\n");
  CommandResult result = RunCommand(Sluice(absl::StrCat("bench '", path, "' --service ", cluster.ServiceUrl(),
                                                        " --replicas CPU:0,CPU:1 --seconds 50")));
  CHECK(result.exit_code == 0);
  CheckBenchSummary(result.out, "replicas:  2 (a batch is one step; elements are summed over replicas)",
                    "end of input", 3, 12, 96);
}

}  // namespace
}  // namespace sluice
