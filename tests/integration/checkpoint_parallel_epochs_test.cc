// Saved parallel_epochs reads (issue 20, section 2), with the real
// dispatcherd and workerd. Every worker runs the whole epoch, so a read of
// 2 workers gives each value twice. A save records, per worker, the
// positions of its epoch delivered; a restore has each worker's task pass
// over them, which is exact when the worker-side pipeline gives the same
// elements in the same order on every run (a seeded shuffle does).
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "sluice/dataset.h"
#include "sluice/iterator.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/test_cluster.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::MakeConsumerOrFail;
using testing::MakeOrFail;
using testing::RestoreOrFail;
using testing::SaveOrFail;
using testing::Take;
using testing::TestCluster;

constexpr int64_t kEpoch = 3000;

// A shared job's consumers read a few elements at a time, so that the
// first cannot drain the whole small epoch before the second joins (a
// consumer joining a finished repetition is refused).
Dataset Pipeline(const std::string& url, const std::string& job_name = "") {
  return Dataset::Range(kEpoch).Shuffle(100, 5).ReadFromService(
      {.service = url,
       .processing_mode = ProcessingMode::kParallelEpochs,
       .job_name = job_name,
       .max_outstanding_requests = job_name.empty() ? 0 : 8});
}

// Each value of the epoch `times` times.
void CheckEachTimes(const std::vector<int64_t>& values, int times) {
  testing::CheckEachValueTimes(values, kEpoch, times);
}

TEST_CASE("parallel_epochs checkpoint: a sole reader resumes with the rest of each worker's epoch",
          "[service][checkpoint]") {
  testing::TempDir work;
  TestCluster cluster({.num_workers = 2, .dispatcher_args = {"--work-dir", work.File("journal")}});
  const Dataset dataset = Pipeline(cluster.ServiceUrl());
  Iterator first = MakeOrFail(dataset);
  std::vector<int64_t> values;
  Take(first, 2501, &values);
  const std::string state = SaveOrFail(first);
  std::vector<int64_t> after_save;
  Take(first, 300, &after_save);  // not part of the saved run
  // The dispatcher killed between save and restore changes nothing.
  cluster.RestartDispatcher();
  Iterator second = RestoreOrFail(dataset, state);
  Take(second, -1, &values);
  CheckEachTimes(values, 2);
  // Saved at its end, it resumes with nothing: each worker's epoch is done.
  Iterator third = RestoreOrFail(dataset, SaveOrFail(second));
  std::vector<int64_t> none;
  Take(third, -1, &none);
  CHECK(none.empty());
}

TEST_CASE("parallel_epochs checkpoint: two consumers of a shared job merge and resume on one",
          "[service][checkpoint]") {
  TestCluster cluster({.num_workers = 2});
  const Dataset dataset = Pipeline(cluster.ServiceUrl(), "parallel-shared");
  std::vector<Iterator> consumers;
  consumers.push_back(MakeConsumerOrFail(dataset));
  consumers.push_back(MakeConsumerOrFail(dataset));
  std::vector<int64_t> values;
  for (int turn = 0; turn < 20; ++turn) {
    for (Iterator& consumer : consumers) Take(consumer, 50, &values);
  }
  const absl::StatusOr<std::string> merged =
      MergeSavedStates({SaveOrFail(consumers[0]), SaveOrFail(consumers[1])});
  INFO(merged.status().ToString());
  REQUIRE(merged.ok());
  Iterator resumed = RestoreOrFail(dataset, *merged, {.consumer_index = 0, .num_consumers = 1});
  Take(resumed, -1, &values);
  CheckEachTimes(values, 2);
}

TEST_CASE("parallel_epochs checkpoint: what cannot be restored exactly says why", "[service][checkpoint]") {
  TestCluster cluster({.num_workers = 2});
  SECTION("an unseeded shuffle on the workers") {
    Iterator iterator = MakeOrFail(Dataset::Range(100).Shuffle(10).ReadFromService(
        {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kParallelEpochs}));
    const absl::StatusOr<std::string> state = iterator.Save();
    CHECK(absl::IsFailedPrecondition(state.status()));
    CHECK_THAT(std::string(state.status().message()),
               Catch::Matchers::Contains("a parallel_epochs read restores only when its workers' pipeline "
                                         "gives the same elements in the same order on every run") &&
                   Catch::Matchers::Contains("step 2 is a shuffle without a seed"));
  }
  SECTION("workers of the save gone at the restore") {
    const Dataset dataset = Pipeline(cluster.ServiceUrl());
    Iterator first = MakeOrFail(dataset);
    std::vector<int64_t> values;
    Take(first, 1000, &values);
    const std::string state = SaveOrFail(first);
    // Another cluster: its workers are at other addresses, so the saved
    // ones' epochs cannot go on; the new ones each run a whole epoch.
    TestCluster other({.num_workers = 1});
    Iterator restored = RestoreOrFail(Pipeline(other.ServiceUrl()), state);
    absl::StatusOr<std::optional<Element>> element;
    int64_t read = 0;
    while ((element = restored.GetNextAsOptional()).ok() && element->has_value()) ++read;
    CHECK(read == kEpoch);
    CHECK(absl::IsDataLoss(element.status()));
    CHECK_THAT(std::string(element.status().message()),
               Catch::Matchers::Contains("restored parallel_epochs read: 2 worker(s) whose epoch the save "
                                         "left unfinished did not serve this read"));
  }
}

}  // namespace
}  // namespace sluice
