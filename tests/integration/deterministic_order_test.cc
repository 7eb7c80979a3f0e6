// Deterministic order (issue 20, section 3), with the real dispatcherd and
// workerd: a distributed_epoch read with `deterministic: true` yields its
// elements in split order whatever the number of workers and a worker lost
// mid-epoch, so a range arrives as 0, 1, 2, ... and a seeded shuffle after
// distribute gives the same sequence with 1 worker or 3.
#include <catch2/catch.hpp>
#include <chrono>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "sluice/dataset.h"
#include "sluice/iterator.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using testing::MakeOrFail;
using testing::Take;
using testing::TestCluster;

constexpr int64_t kEpoch = 20000;

ServiceOptions Deterministic(const std::string& url, const std::string& job_name = "") {
  return {.service = url,
          .processing_mode = ProcessingMode::kDistributedEpoch,
          .job_name = job_name,
          .deterministic = true};
}

std::vector<int64_t> Iota(int64_t begin, int64_t end) {
  std::vector<int64_t> values(end - begin);
  std::iota(values.begin(), values.end(), begin);
  return values;
}

// The whole epoch read with `num_workers` workers; splits of 16 elements,
// so that each worker runs many and they interleave.
std::vector<int64_t> ReadAll(int num_workers, const std::function<Dataset(const std::string&)>& pipeline) {
  TestCluster cluster({.num_workers = num_workers, .dispatcher_args = {"--elements-per-split", "16"}});
  Iterator iterator = MakeOrFail(pipeline(cluster.ServiceUrl()));
  std::vector<int64_t> values;
  Take(iterator, -1, &values);
  return values;
}

TEST_CASE("deterministic order: a range arrives in order with 1 worker and with 3",
          "[service][deterministic]") {
  const auto pipeline = [](const std::string& url) {
    return Dataset::Range(kEpoch).ReadFromService(Deterministic(url));
  };
  CHECK(ReadAll(1, pipeline) == Iota(0, kEpoch));
  CHECK(ReadAll(3, pipeline) == Iota(0, kEpoch));
}

TEST_CASE("deterministic order: elements flow in order long before the epoch ends",
          "[service][deterministic]") {
  // An epoch too long to finish: what arrives must come in order while the
  // read goes on, not be sorted at the end.
  TestCluster cluster({.num_workers = 3, .dispatcher_args = {"--elements-per-split", "16"}});
  Iterator iterator =
      MakeOrFail(Dataset::Range(int64_t{1} << 40).ReadFromService(Deterministic(cluster.ServiceUrl())));
  std::vector<int64_t> values;
  Take(iterator, 50000, &values);
  CHECK(values == Iota(0, 50000));
}

TEST_CASE("deterministic order: a seeded shuffle after distribute repeats with 1 worker or 3",
          "[service][deterministic]") {
  const auto pipeline = [](const std::string& url) {
    return Dataset::Range(kEpoch).Map("square").ReadFromService(Deterministic(url)).Shuffle(100, 7);
  };
  const std::vector<int64_t> one = ReadAll(1, pipeline);
  REQUIRE(one.size() == static_cast<size_t>(kEpoch));
  CHECK(one != Iota(0, kEpoch));  // shuffled
  CHECK(ReadAll(3, pipeline) == one);
}

TEST_CASE("deterministic order: a worker lost mid-epoch changes nothing", "[service][deterministic]") {
  TestCluster cluster({.num_workers = 3, .dispatcher_args = {"--elements-per-split", "16"}});
  Iterator iterator = MakeOrFail(Dataset::Range(kEpoch).ReadFromService(Deterministic(cluster.ServiceUrl())));
  std::vector<int64_t> values;
  Take(iterator, 5000, &values);
  cluster.KillWorker(0);
  Take(iterator, -1, &values);
  CHECK(values == Iota(0, kEpoch));
}

TEST_CASE("deterministic order: a saved read resumes in order", "[service][deterministic][checkpoint]") {
  TestCluster cluster({.num_workers = 3, .dispatcher_args = {"--elements-per-split", "16"}});
  const Dataset dataset = Dataset::Range(kEpoch).ReadFromService(Deterministic(cluster.ServiceUrl()));
  Iterator first = MakeOrFail(dataset);
  std::vector<int64_t> values;
  Take(first, 7001, &values);
  const absl::StatusOr<std::string> state = first.Save();
  REQUIRE(state.ok());
  absl::StatusOr<Iterator> second = dataset.MakeIterator(*state);
  INFO(second.status().ToString());
  REQUIRE(second.ok());
  Take(*second, -1, &values);
  CHECK(values == Iota(0, kEpoch));
  // Its job checkpoint resumes on one consumer only: a deterministic job
  // takes one at a time.
  const absl::StatusOr<std::string> merged = MergeSavedStates({*state});
  REQUIRE(merged.ok());
  absl::StatusOr<Iterator> two = dataset.MakeIterator(*merged, {.consumer_index = 0, .num_consumers = 2});
  absl::Status refused = two.status();
  if (two.ok()) refused = two->GetNextAsOptional().status();
  CHECK(absl::IsFailedPrecondition(refused));
  CHECK_THAT(std::string(refused.message()),
             Catch::Matchers::Contains("restore: a deterministic read has one consumer at a time, so its job "
                                       "checkpoint resumes on 1 consumer, not 2"));
}

TEST_CASE("deterministic order: what cannot be ordered is refused", "[service][deterministic]") {
  TestCluster cluster({.num_workers = 1});
  const std::string url = cluster.ServiceUrl();
  SECTION("a second consumer of a named job") {
    Iterator first = MakeOrFail(Dataset::Range(kEpoch).ReadFromService(Deterministic(url, "ordered")));
    std::vector<int64_t> values;
    Take(first, 10, &values);
    const absl::StatusOr<Iterator> second =
        Dataset::Range(kEpoch).ReadFromService(Deterministic(url, "ordered")).MakeIterator();
    CHECK(absl::IsFailedPrecondition(second.status()));
    CHECK_THAT(std::string(second.status().message()),
               Catch::Matchers::Contains(
                   "job 'ordered' is deterministic and its repetition 0 already has or had a consumer: "
                   "another would take part of its splits, so no order could be reproduced (read it from one "
                   "consumer, under a new job_name to read it again, or set deterministic: false)"));
  }
  SECTION("parallel_epochs") {
    ServiceOptions options = Deterministic(url);
    options.processing_mode = ProcessingMode::kParallelEpochs;
    const absl::StatusOr<Iterator> refused = Dataset::Range(kEpoch).ReadFromService(options).MakeIterator();
    CHECK(absl::IsFailedPrecondition(refused.status()));
    CHECK_THAT(
        std::string(refused.status().message()),
        Catch::Matchers::Contains("deterministic needs distributed_epoch; the job is parallel_epochs"));
  }
  SECTION("a worker side whose output depends on more than one split") {
    const absl::StatusOr<Iterator> refused =
        Dataset::Range(kEpoch).Shuffle(10, 1).ReadFromService(Deterministic(url)).MakeIterator();
    CHECK(absl::IsFailedPrecondition(refused.status()));
    CHECK_THAT(
        std::string(refused.status().message()),
        Catch::Matchers::Contains("deterministic runs the worker side once per split") &&
            Catch::Matchers::Contains("step 2 is shuffle, whose output depends on more than one split"));
  }
}

}  // namespace
}  // namespace sluice
