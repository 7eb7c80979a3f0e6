// Integration tests of coordinated reads (num_consumers, consumer_index):
// real daemons on 127.0.0.1, consumers reading in parallel threads.
#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <thread>

#include "sluice/dataset.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using testing::TestCluster;

constexpr int kConsumers = 3;

proto::DistributeOp Coordinated(const TestCluster& cluster, int consumer_index) {
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_job_name("coordinated");
  op.set_num_consumers(kConsumers);
  op.set_consumer_index(consumer_index);
  op.set_max_outstanding_requests(4);
  return op;
}

// Each of kConsumers threads reads `rounds` elements of range(10^9)
// repeated; `during(rounds_read_by_consumer_0)` runs on this thread until
// they are done. values[c][r] is consumer c's element of round r.
std::vector<std::vector<int64_t>> ReadRounds(const TestCluster& cluster, int rounds,
                                             const std::function<void(int)>& during) {
  std::vector<std::vector<int64_t>> values(kConsumers);
  std::atomic<int> progress{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c) {
    consumers.emplace_back([&, c] {
      absl::StatusOr<DatasetPtr> dataset =
          Dataset::Range(1000000000).Repeat().Distribute(Coordinated(cluster, c)).Build();
      if (!dataset.ok()) return void(++failures);
      absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*dataset)->MakeIterator(IteratorContext());
      if (!iterator.ok()) return void(++failures);
      for (int r = 0; r < rounds; ++r) {
        Element element;
        bool end = false;
        if (!(*iterator)->GetNext(&element, &end).ok() || end) return void(++failures);
        values[c].push_back(element.components.at(0).data<int64_t>()[0]);
        if (c == 0) progress = r + 1;
      }
    });
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (progress < rounds && failures == 0 && std::chrono::steady_clock::now() < give_up) {
    during(progress);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (std::thread& consumer : consumers) consumer.join();
  REQUIRE(failures == 0);
  return values;
}

// Every round gives the consumers consecutive elements of one worker's
// stream: consumer c gets the round's first element plus c, and each
// worker's rounds start at multiples of kConsumers.
void CheckRoundsConsistent(const std::vector<std::vector<int64_t>>& values) {
  for (size_t r = 0; r < values[0].size(); ++r) {
    INFO("round " << r << ": " << values[0][r] << ", " << values[1][r] << ", " << values[2][r]);
    CHECK(values[0][r] % kConsumers == 0);
    for (int c = 1; c < kConsumers; ++c) CHECK(values[c][r] == values[0][r] + c);
  }
}

TEST_CASE("coordinated: 2 workers x 3 consumers, each round consecutive elements of one worker",
          "[service][coordinated]") {
  TestCluster cluster({.num_workers = 2});
  const auto values = ReadRounds(cluster, 60, [](int) {});
  CheckRoundsConsistent(values);
  // Rounds alternate between the two workers, each reading its own stream.
  for (int r = 0; r < 60; ++r) CHECK(values[0][r] == kConsumers * (r / 2));
}

TEST_CASE("coordinated: a worker added mid-job joins the rounds after the horizon",
          "[service][coordinated]") {
  TestCluster cluster({.num_workers = 2, .dispatcher_args = {"--round-window", "8"}});
  bool added = false;
  // Enough rounds for the new worker's turn to come even when it is slow
  // to start on a loaded machine.
  const auto values = ReadRounds(cluster, 400, [&](int read) {
    if (read >= 20 && !added) {
      cluster.AddWorker();
      added = true;
    }
  });
  CheckRoundsConsistent(values);
  // The new worker's stream starts at 0: some late round has its first.
  int new_worker_rounds = 0;
  for (int r = 20; r < 400; ++r) new_worker_rounds += values[0][r] == 0;
  CHECK(new_worker_rounds == 1);
}

TEST_CASE("coordinated: rounds stay consistent through a dispatcher restart", "[service][coordinated]") {
  testing::TempDir work;
  TestCluster cluster(
      {.num_workers = 2, .dispatcher_args = {"--work-dir", work.path(), "--round-window", "8"}});
  bool restarted = false;
  const auto values = ReadRounds(cluster, 80, [&](int read) {
    if (read >= 20 && !restarted) {
      cluster.RestartDispatcher();
      restarted = true;
    }
  });
  CHECK(restarted);
  CheckRoundsConsistent(values);
  for (int r = 0; r < 80; ++r) CHECK(values[0][r] == kConsumers * (r / 2));
}

TEST_CASE("coordinated: a lost worker's rounds move to the others, consistently", "[service][coordinated]") {
  TestCluster cluster({.num_workers = 3, .dispatcher_args = {"--worker-timeout-ms", "1000"}});
  bool killed = false;
  const auto values = ReadRounds(cluster, 120, [&](int read) {
    if (read >= 20 && !killed) {
      cluster.KillWorker(2);
      killed = true;
    }
  });
  CHECK(killed);
  CheckRoundsConsistent(values);
}

TEST_CASE("coordinated: a finite dataset and a late consumer are FailedPrecondition",
          "[service][coordinated]") {
  TestCluster cluster({.num_workers = 1});
  absl::StatusOr<DatasetPtr> finite = Dataset::Range(20).Distribute(Coordinated(cluster, 0)).Build();
  REQUIRE(finite.ok());
  const absl::Status status = (*finite)->MakeIterator(IteratorContext()).status();
  REQUIRE(absl::IsFailedPrecondition(status));
  CHECK(status.message() ==
        "coordinated reads (num_consumers) need an infinite dataset, so that every round has an element for "
        "each "
        "consumer; dataset 1000 has 20 elements (add repeat)");

  ReadRounds(cluster, 10, [](int) {});
  absl::StatusOr<DatasetPtr> late =
      Dataset::Range(1000000000).Repeat().Distribute(Coordinated(cluster, 1)).Build();
  REQUIRE(late.ok());
  const absl::Status joined = (*late)->MakeIterator(IteratorContext()).status();
  REQUIRE(absl::IsFailedPrecondition(joined));
  CHECK_THAT(std::string(joined.message()), Catch::Matchers::StartsWith("job 'coordinated' is at round "));
  CHECK_THAT(
      std::string(joined.message()),
      Catch::Matchers::EndsWith(": consumer 1 has already joined; a set of 3 coordinated consumers must "
                                "start together at round 0"));
}

TEST_CASE("coordinated: sluice read --num-consumers --consumer-index", "[service][coordinated][cli]") {
  TestCluster cluster({.num_workers = 1});
  testing::WriteFile(cluster.dir().File("forever.yaml"),
                     "pipeline:\n  - range: 1000\n  - repeat\n  - distribute: {job_name: together}\n");
  auto reader = [&](int index) {
    return std::string(SLUICE_CLI) + " read " + cluster.dir().File("forever.yaml") + " --service " +
           cluster.ServiceUrl() + " --num-consumers 2 --consumer-index " + std::to_string(index) +
           " --limit 5 > " + cluster.dir().File("consumer" + std::to_string(index) + ".out");
  };
  // Both at once: a round needs both consumers.
  testing::CommandResult result = testing::RunCommand(reader(0) + " & " + reader(1) + "; wait");
  CHECK(result.exit_code == 0);
  // One worker: round r is its elements 2r and 2r+1.
  CHECK(testing::ReadFileOrEmpty(cluster.dir().File("consumer0.out")) == "0\n2\n4\n6\n8\n");
  CHECK(testing::ReadFileOrEmpty(cluster.dir().File("consumer1.out")) == "1\n3\n5\n7\n9\n");
}

}  // namespace
}  // namespace sluice
