// Integration tests of DistributeDataset over a real data service: real
// dispatcherd and workerd processes on 127.0.0.1 (see test_cluster.h), read
// with CPU replicas, and the SDK example trainer loop run against them.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/distribute.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TestCluster;

ReplicaSet Cpus() { return *ReplicaSet::Create({"CPU:0", "CPU:1"}); }

// One pass: every replica's int64 values, in order of arrival, plus the
// number of steps.
struct Pass {
  std::vector<int64_t> values;
  int steps = 0;
};

Pass ReadPass(const DistributedDataset& dataset) {
  Pass pass;
  for (const PerReplica& step : dataset) {
    ++pass.steps;
    REQUIRE(step.size() == 2);
    for (const ReplicaValue& value : step) {
      CHECK(value.num_rows() == 4);
      Tensor host = *value.components[0].ToHostTensor();
      for (int64_t v : host.values<int64_t>()) pass.values.push_back(v);
    }
  }
  INFO(dataset.loop_status().ToString());
  REQUIRE(dataset.loop_status().ok());
  std::sort(pass.values.begin(), pass.values.end());
  return pass;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = i;
  return values;
}

TEST_CASE("distribute: each iteration of a service-backed dataset is a new repetition",
          "[service][distribute]") {
  TestCluster cluster({.num_workers = 2});
  // The batch runs on the workers: each global batch of 8 is one worker's.
  Dataset dataset =
      Dataset::Range(64).Batch(8).ReadFromService({.service = cluster.ServiceUrl(),
                                                   .processing_mode = ProcessingMode::kDistributedEpoch,
                                                   .job_name = "epochs"});
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(dataset, Cpus());
  REQUIRE(distributed.ok());
  for (int epoch = 0; epoch < 3; ++epoch) {
    Pass pass = ReadPass(*distributed);
    CHECK(pass.steps == 8);
    CHECK(pass.values == Iota(64));
  }
}

// Reads one iterator of `dataset` to its end: the int64 scalars, sorted.
std::vector<int64_t> ReadEpoch(const Dataset& dataset) {
  absl::StatusOr<Iterator> it = dataset.MakeIterator();
  REQUIRE(it.ok());
  std::vector<int64_t> values;
  for (const Element& element : *it) {
    for (int64_t v : element.components[0].values<int64_t>()) values.push_back(v);
  }
  INFO(it->status().ToString());
  REQUIRE(it->status().ok());
  std::sort(values.begin(), values.end());
  return values;
}

TEST_CASE(
    "distribute: MakeIterator again on a Dataset, its copy or a dataset made from it reads the "
    "next repetition",
    "[service][distribute]") {
  TestCluster cluster({.num_workers = 2});
  const Dataset dataset =
      Dataset::Range(50).ReadFromService({.service = cluster.ServiceUrl(),
                                          .processing_mode = ProcessingMode::kDistributedEpoch,
                                          .job_name = "again"});
  CHECK(ReadEpoch(dataset) == Iota(50));
  CHECK(dataset.NextReadRepetition() == 1);
  const Dataset copy = dataset;  // NOLINT: the copy is the point
  CHECK(ReadEpoch(copy) == Iota(50));
  CHECK(ReadEpoch(dataset.Batch(7)) == Iota(50));
  CHECK(dataset.NextReadRepetition() == 3);
  // Another Dataset object counts from 0, a repetition already read.
  const Dataset other =
      Dataset::Range(50).ReadFromService({.service = cluster.ServiceUrl(),
                                          .processing_mode = ProcessingMode::kDistributedEpoch,
                                          .job_name = "again"});
  absl::StatusOr<Iterator> late = other.MakeIterator();
  const absl::Status status = late.ok() ? late->GetNext().status() : late.status();
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(
      std::string(status.message()),
      Catch::Matchers::Contains("job 'again' repetition 0 was already read to its end by other consumers"));
  // Set where the count stands, as a pickled copy does.
  other.SetNextReadRepetition(3);
  CHECK(ReadEpoch(other) == Iota(50));
}

TEST_CASE("distribute: two trainers of one named job share its elements", "[service][distribute]") {
  TestCluster cluster({.num_workers = 1});
  // Enough that the first trainer, prefetching in the background, cannot
  // read the repetition to its end before the second has joined it (the
  // iterators join in the background; one that joins a repetition already
  // read to its end is refused, by design): 80 elements were gone in
  // under a millisecond, and on a loaded machine the second joined late.
  constexpr int64_t kElements = 20000;
  auto dataset = [&] {
    return Dataset::Range(kElements)
        .ReadFromService({.service = cluster.ServiceUrl(),
                          .processing_mode = ProcessingMode::kDistributedEpoch,
                          .job_name = "shared"})
        .Batch(8);
  };
  // Two trainers (as in two processes), each with its own Dataset: each
  // one's first iteration is repetition 0 of the job.
  absl::StatusOr<DistributedDataset> trainer_a = DistributeDataset(dataset(), Cpus());
  absl::StatusOr<DistributedDataset> trainer_b = DistributeDataset(dataset(), Cpus());
  REQUIRE(trainer_a.ok());
  REQUIRE(trainer_b.ok());
  absl::StatusOr<DistributedIterator> first = trainer_a->MakeIterator();
  absl::StatusOr<DistributedIterator> second = trainer_b->MakeIterator();
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  std::vector<int64_t> seen;
  // One step of each first: both have joined the repetition.
  auto take = [&](DistributedIterator& iterator) {
    absl::StatusOr<std::optional<PerReplica>> step = iterator.GetNextAsOptional();
    INFO(step.status().ToString());
    REQUIRE(step.ok());
    if (!step->has_value()) return false;
    for (const ReplicaValue& value : **step) {
      for (int64_t v : value.components[0].ToHostTensor()->values<int64_t>()) seen.push_back(v);
    }
    return true;
  };
  REQUIRE(take(*first));
  REQUIRE(take(*second));
  for (DistributedIterator* iterator : {&*first, &*second}) {
    while (take(*iterator)) {
    }
  }
  std::sort(seen.begin(), seen.end());
  // Two consumers of one repetition: each element once between them.
  CHECK(seen == Iota(kElements));
}

TEST_CASE("distribute: the example trainer loop reads two epochs from real daemons",
          "[service][distribute]") {
  TestCluster cluster({.num_workers = 1});
  CommandResult result = RunCommand(absl::StrCat("timeout 60 '", SLUICE_TRAINER_LOOP, "' --service ",
                                                 cluster.ServiceUrl(), " --epochs 2 2>&1"));
  INFO(result.out);
  CHECK(result.exit_code == 0);
  const std::string expected_epoch = ": 8 steps, CPU:0 944, CPU:1 1072, total 2016\n";
  CHECK(result.out == absl::StrCat("epoch 1", expected_epoch, "epoch 2", expected_epoch));
}

// The whole path onto a GPU: batches decoded from the network (into the
// pinned buffer cache) and copied by the prefetcher. Skips without a GPU.
TEST_CASE("distribute: 1 MiB float batches from two workers arrive whole on GPU:0",
          "[service][distribute][gpu]") {
  if (NumLocalGpus() == 0) {
    WARN("skipped: no CUDA GPU on this machine (cudaGetDeviceCount found none)");
    return;
  }
  TestCluster cluster({.num_workers = 2});
  constexpr int64_t kRows = 1 << 18;  // a batch of 2^18 float32 is 1 MiB
  constexpr int64_t kElements = 16 * kRows;
  Dataset dataset = Dataset::Range(kElements)
                        .Map("cast", {{"dtype", "float32"}})
                        .Batch(kRows)
                        .ReadFromService({.service = cluster.ServiceUrl(),
                                          .processing_mode = ProcessingMode::kDistributedEpoch});
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(dataset, *ReplicaSet::Create({"GPU:0"}));
  REQUIRE(distributed.ok());
  std::vector<float> seen;
  seen.reserve(kElements);
  for (const PerReplica& step : *distributed) {
    REQUIRE(step.size() == 1);
    CHECK(step[0].device.name() == "GPU:0");
    absl::StatusOr<Tensor> host = step[0].components[0].ToHostTensor();
    REQUIRE(host.ok());
    for (float v : host->values<float>()) seen.push_back(v);
  }
  INFO(distributed->loop_status().ToString());
  REQUIRE(distributed->loop_status().ok());
  std::sort(seen.begin(), seen.end());
  // Every value below 2^24 is exact in float32: each element once.
  REQUIRE(seen.size() == static_cast<size_t>(kElements));
  bool whole = true;
  for (int64_t i = 0; i < kElements; ++i)
    whole = whole && seen[static_cast<size_t>(i)] == static_cast<float>(i);
  CHECK(whole);
}

}  // namespace
}  // namespace sluice
