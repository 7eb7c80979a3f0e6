// Integration tests of the dispatcher's side of issue 14: a worker
// restarted mid-epoch in parallel_epochs does not read its epoch again
// (the read reports what was cut short), and a failed iteration reaches
// every reader with the worker's words instead of moving to the next
// worker.
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "sluice/dataset.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::TestCluster;

TEST_CASE(
    "hardening dispatcher: a worker restarted mid-epoch in parallel_epochs is not given the epoch again",
    "[service][hardening][dispatcher]") {
  TestCluster cluster({.num_workers = 2, .worker_args = {"--buffer-elements", "8"}});
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("parallel_epochs");
  op.set_max_outstanding_requests(8);
  constexpr int64_t kElements = 100000;
  absl::StatusOr<DatasetPtr> built = Dataset::Range(kElements).Distribute(op).Build();
  REQUIRE(built.ok());
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*built)->MakeIterator(IteratorContext{});
  REQUIRE(iterator.ok());
  std::map<int64_t, int> counts;
  int64_t total = 0;
  absl::Status status;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    Element element;
    bool end = false;
    status = (*iterator)->GetNext(&element, &end);
    if (!status.ok() || end) break;
    ++counts[element.components.at(0).data<int64_t>()[0]];
    if (++total == 1000) cluster.RestartWorker(1);
  }
  INFO(status.ToString());
  REQUIRE(absl::IsDataLoss(status));
  CHECK_THAT(std::string(status.message()), Contains(", worker restarted) after "));
  // Each value at most twice (once per worker): the restarted worker did
  // not start its epoch over, which made values repeat three times.
  int most = 0;
  for (const auto& [value, count] : counts) most = std::max(most, count);
  CHECK(most <= 2);
  CHECK(total < 2 * kElements);
  CHECK(total >= kElements);
}

TEST_CASE("hardening dispatcher: a pipeline that fails on a worker fails the iteration for every reader",
          "[service][hardening][dispatcher]") {
  TestCluster cluster({.num_workers = 2});
  // A file that does not exist: the pipeline fails on whichever worker
  // runs it, and the iteration fails with that worker's words rather than
  // moving to the next worker.
  const std::string missing = cluster.dir().File("no_such_file.tfrecord");
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  op.set_job_name("failing");
  Dataset dataset = Dataset::TFRecord({missing}).Distribute(op);
  for (int reader = 0; reader < 2; ++reader) {
    absl::StatusOr<std::vector<Element>> read = dataset.Collect();
    INFO(read.status().ToString());
    REQUIRE_FALSE(read.ok());
    CHECK_THAT(std::string(read.status().message()), Contains(missing));
  }
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dispatcher().log_path()),
             Contains("iteration 1 failed: task "));
  CHECK(cluster.RegisteredWorkers() == 2);
}

}  // namespace
}  // namespace sluice
