#include "pipeline/sharding.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "client/dataset_internal.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Ints = std::vector<int64_t>;
const ShardNames kWorkers{"FILE sharding", "workers"};

// Shards `dataset` and runs it here.
Ints ShardedInts(const Dataset& dataset, ShardBy by, int num_shards, int index) {
  proto::DatasetDef def = internal::DefinitionOf(dataset);
  absl::Status status = ShardDatasetDef(by, num_shards, index, def.steps_size(), kWorkers, &def);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return testing::IntsOf(internal::DatasetFromDefinition(def));
}

std::vector<std::string> FilesOf(const proto::DatasetDef& def) {
  return {def.steps(0).tfrecord().files().begin(), def.steps(0).tfrecord().files().end()};
}

TEST_CASE("sharding: DATA keeps every N-th element, as the issue's 5-worker example", "[sharding]") {
  CHECK(ShardedInts(Dataset::Range(20), ShardBy::kData, 5, 1) == Ints{1, 6, 11, 16});
  CHECK(ShardedInts(Dataset::Range(20), ShardBy::kData, 5, 4) == Ints{4, 9, 14, 19});
  // Inserted where asked: before a batch, each shard batches its own.
  proto::DatasetDef def = internal::DefinitionOf(Dataset::Range(8).Batch(2));
  REQUIRE(ShardDatasetDef(ShardBy::kData, 2, 0, 1, kWorkers, &def).ok());
  REQUIRE(def.steps_size() == 3);
  CHECK(def.steps(1).shard().num_shards() == 2);
  CHECK(def.steps(2).has_batch());
}

TEST_CASE("sharding: FILE gives each shard every N-th file, and needs enough files", "[sharding]") {
  const Dataset records = Dataset::TFRecord({"a", "b", "c", "d"});
  proto::DatasetDef def = internal::DefinitionOf(records);
  REQUIRE(ShardDatasetDef(ShardBy::kFile, 3, 0, def.steps_size(), kWorkers, &def).ok());
  CHECK(FilesOf(def) == std::vector<std::string>{"a", "d"});

  proto::DatasetDef too_few = internal::DefinitionOf(records);
  absl::Status status = ShardDatasetDef(ShardBy::kFile, 5, 1, too_few.steps_size(), kWorkers, &too_few);
  REQUIRE(absl::IsInvalidArgument(status));
  CHECK(status.message() == "FILE sharding over 5 workers needs at least as many files; tfrecord reads 4");

  proto::DatasetDef range = internal::DefinitionOf(Dataset::Range(10));
  absl::Status not_files = ShardDatasetDef(ShardBy::kFile, 2, 0, 1, kWorkers, &range);
  CHECK(not_files.message() ==
        "FILE sharding needs a file source (list_files, image_folder, webdataset, text_line, json_lines, "
        "tfrecord or "
        "fixed_length_record); the pipeline starts with range");
}

TEST_CASE("sharding: FILE_OR_DATA shards files when it can, elements otherwise", "[sharding]") {
  CHECK(ShardedInts(Dataset::Range(6), ShardBy::kFileOrData, 2, 1) == Ints{1, 3, 5});
  proto::DatasetDef def = internal::DefinitionOf(Dataset::TFRecord({"a", "b"}));
  REQUIRE(ShardDatasetDef(ShardBy::kFileOrData, 2, 1, def.steps_size(), kWorkers, &def).ok());
  CHECK(FilesOf(def) == std::vector<std::string>{"b"});
}

TEST_CASE("sharding: concatenate is sharded by DATA, never by FILE", "[sharding]") {
  proto::DatasetDef def =
      internal::DefinitionOf(Dataset::TFRecord({"a", "b"}).Concatenate(Dataset::TFRecord({"c"})));
  absl::Status status = ShardDatasetDef(ShardBy::kFile, 2, 0, def.steps_size(), kWorkers, &def);
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(status.message() ==
        "FILE sharding cannot shard this pipeline by its source's files: step 2 (concatenate) would read its "
        "whole pipeline on every worker (DATA sharding keeps it exact)");
  // FILE_OR_DATA falls back to DATA, which stays exact.
  proto::DatasetDef data =
      internal::DefinitionOf(Dataset::TFRecord({"a", "b"}).Concatenate(Dataset::TFRecord({"c"})));
  REQUIRE(ShardDatasetDef(ShardBy::kFileOrData, 2, 1, data.steps_size(), kWorkers, &data).ok());
  CHECK(FilesOf(data) == std::vector<std::string>{"a", "b"});
  REQUIRE(data.steps_size() == 3);
  CHECK(data.steps(2).shard().index() == 1);
  CHECK(ShardedInts(Dataset::Range(3).Concatenate(Dataset::Range(7, 9)), ShardBy::kFileOrData, 2, 1) ==
        Ints{1, 7});
}

TEST_CASE("sharding: unique is sharded by DATA, never by FILE", "[sharding]") {
  proto::DatasetDef def = internal::DefinitionOf(Dataset::TFRecord({"a", "b"}).Unique());
  CHECK(ShardDatasetDef(ShardBy::kFile, 2, 0, def.steps_size(), kWorkers, &def).message() ==
        "FILE sharding cannot shard this pipeline by its source's files: step 2 (unique) would drop repeats "
        "only "
        "within each worker's elements (DATA sharding keeps it exact)");
  const Dataset repeats = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({5, 1, 5, 2, 1, 3, 2})});
  CHECK(ShardedInts(repeats.Unique(), ShardBy::kFileOrData, 2, 0) == Ints{5, 2});
  CHECK(ShardedInts(repeats.Unique(), ShardBy::kFileOrData, 2, 1) == Ints{1, 3});
}

TEST_CASE("sharding: HINT fills in SHARD_HINT, which alone keeps everything", "[sharding]") {
  const Dataset hinted = Dataset::Range(9).Shard(kShardHint, kShardHint).Map("square");
  CHECK(testing::IntsOf(hinted) == Ints{0, 1, 4, 9, 16, 25, 36, 49, 64});
  CHECK(ShardedInts(hinted, ShardBy::kHint, 3, 2) == Ints{4, 25, 64});
  proto::DatasetDef plain = internal::DefinitionOf(Dataset::Range(9));
  absl::Status status = ShardDatasetDef(ShardBy::kHint, 3, 0, 1, kWorkers, &plain);
  REQUIRE(absl::IsFailedPrecondition(status));
  CHECK(status.message() ==
        "HINT sharding needs a shard step with num_shards: -1 and index: -1 (SHARD_HINT); the pipeline has "
        "none");
}

}  // namespace
}  // namespace sluice
