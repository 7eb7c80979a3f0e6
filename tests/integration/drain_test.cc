// Integration tests of scaling down: a worker drained mid-read (SIGTERM, or
// `sluice drain`) finishes or hands back what it holds and exits 0 on its
// own; an exactly_once read stays exact, and a parallel_epochs read ends
// cleanly. Real daemons on 127.0.0.1 (test_cluster.h).
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "sluice/dataset.h"
#include "tests/integration/captured_warnings.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::TestCluster;
using Clock = std::chrono::steady_clock;

constexpr auto kExitBound = std::chrono::seconds(10);

std::string WorkerAddress(TestCluster& cluster, int i) {
  return absl::StrCat("127.0.0.1:", cluster.WorkerPort(i));
}

// Worker `i`, drained at `drained_at`, exits 0 by itself within kExitBound,
// having waited for its readers rather than for drain_timeout_ms.
void CheckLeftCleanly(TestCluster& cluster, int i, Clock::time_point drained_at) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(kExitBound - (Clock::now() - drained_at));
  const int code = cluster.worker(i).Wait(std::max(left, std::chrono::milliseconds(1)));
  const std::string log = testing::ReadFileOrEmpty(cluster.worker(i).log_path());
  INFO(log);
  CHECK(code == 0);
  CHECK_THAT(log, Contains("drained: every task was read to its end"));
}

TEST_CASE("drain: an exactly_once read over a draining worker gets every element exactly once",
          "[service][drain]") {
  constexpr int64_t kElements = 6000;
  TestCluster cluster(
      {.num_workers = 3,
       .dispatcher_args = {"--elements-per-split", "100"},
       .worker_args = {"--drain-timeout-ms", "20000", "--buffer-elements", "8", "--log-level", "info"}});
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  op.set_exactly_once(true);
  op.set_max_outstanding_requests(8);
  Clock::time_point drained_at;
  std::function<void()> drain;
  // `sluice drain --wait`, which returns once the worker has left.
  std::future<testing::CommandResult> drained;
  SECTION("SIGTERM") {
    drain = [&] { REQUIRE(kill(cluster.worker(0).pid(), SIGTERM) == 0); };
  }
  SECTION("sluice drain") {
    // An unknown worker is an error that names it.
    const testing::CommandResult unknown = testing::RunCommand(
        absl::StrCat(SLUICE_CLI, " drain 127.0.0.1:1 --dispatcher ", cluster.ServiceUrl(), " 2>&1"));
    CHECK(unknown.exit_code == 2);
    CHECK_THAT(unknown.out, Contains("no worker is registered at 127.0.0.1:1"));
    drain = [&] {
      drained = std::async(
          std::launch::async,
          [command = absl::StrCat(SLUICE_CLI, " drain ", WorkerAddress(cluster, 0), " --dispatcher ",
                                  cluster.ServiceUrl(), " --wait --timeout-ms 15000 2>&1")] {
            return testing::RunCommand(command);
          });
    };
  }
  // Paced (2 ms each 10 elements), so that the drain lands mid-read.
  const std::map<int64_t, int> counts = testing::ReadCounts(
      internal::ReadFromService(Dataset::Range(kElements), op),
      [&](int64_t read) {
        if (read != kElements / 5) return;
        drained_at = Clock::now();
        drain();
      },
      /*pause_every=*/10);
  std::map<int64_t, int> expected;
  for (int64_t i = 0; i < kElements; ++i) expected[i] = 1;
  CHECK(counts == expected);
  CheckLeftCleanly(cluster, 0, drained_at);
  CHECK(cluster.RegisteredWorkers() == 2);
  if (drained.valid()) {
    const testing::CommandResult result = drained.get();
    INFO(result.out);
    CHECK(result.exit_code == 0);
    CHECK_THAT(result.out, Contains("worker " + WorkerAddress(cluster, 0) + " drains"));
    CHECK_THAT(result.out, Contains("worker " + WorkerAddress(cluster, 0) + " has left"));
  }
}

TEST_CASE("drain: a parallel_epochs read ends cleanly when a worker drains, the others' epochs whole",
          "[service][drain]") {
  constexpr int64_t kElements = 3000;
  TestCluster cluster(
      {.num_workers = 2,
       .worker_args = {"--drain-timeout-ms", "20000", "--buffer-elements", "8", "--log-level", "info"}});
  testing::CapturedWarnings warnings;
  Clock::time_point drained_at;
  const std::map<int64_t, int> counts = testing::ReadCounts(
      Dataset::Range(kElements).ReadFromService(
          {.service = cluster.ServiceUrl(), .max_outstanding_requests = 8}),
      [&](int64_t read) {
        if (read != kElements / 4) return;
        drained_at = Clock::now();
        REQUIRE(kill(cluster.worker(0).pid(), SIGTERM) == 0);
      },
      /*pause_every=*/10);
  // Worker 1's epoch is whole; worker 0's ended early, each element once.
  int64_t total = 0;
  for (int64_t i = 0; i < kElements; ++i) {
    INFO("element " << i);
    REQUIRE(counts.contains(i));
    CHECK(counts.at(i) <= 2);
    total += counts.at(i);
  }
  CHECK(total < 2 * kElements);
  INFO(warnings.joined());
  CHECK_THAT(warnings.joined(),
             Contains("drained workers (scaled down) ended their epochs early, cleanly: worker " +
                      WorkerAddress(cluster, 0)));
  CHECK_THAT(warnings.joined(),
             Contains(absl::StrCat("after ", total - kElements, " of ", kElements, " elements")));
  CheckLeftCleanly(cluster, 0, drained_at);
}

}  // namespace
}  // namespace sluice
