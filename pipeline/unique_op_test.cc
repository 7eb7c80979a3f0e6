// Tests of unique (unique_op.cc): tf.data's documented example, strings,
// the element types it takes, and its checkpoint of the values seen.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"
#include "sluice/iterator.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::BuildError;
using testing::IntsOf;
using testing::JsonOf;
using testing::MustBuild;
using testing::Yaml;
using Ints = std::vector<int64_t>;
using Lines = std::vector<std::string>;

TEST_CASE("unique: tf.data's example keeps first occurrences in order", "[ops][unique]") {
  // tf.data: from_tensor_slices([1, 37, 2, 37, 2, 1]).unique() gives 1, 37, 2.
  const Dataset values = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({1, 37, 2, 37, 2, 1})});
  CHECK(IntsOf(values.Unique()) == Ints{1, 37, 2});
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [1, 37, 2, 37, 2, 1]\n  - unique\n") ==
        Lines{"1", "37", "2"});
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [1, 37, 2, 37, 2, 1]\n  - unique: {}\n") ==
        Lines{"1", "37", "2"});
  // int32, as tf.data takes.
  CHECK(JsonOf(values.Map("cast", {{"dtype", "int32"}}).Unique()) == Lines{"1", "37", "2"});
}

TEST_CASE("unique: YAML gives the SDK's definition", "[ops][unique][yaml]") {
  CHECK(testing::YamlFingerprint("pipeline:\n  - range: 3\n  - unique\n") ==
        Dataset::Range(3).Unique().Fingerprint());
  absl::StatusOr<Lines> extra = testing::RunYaml("pipeline:\n  - range: 3\n  - unique: {seed: 1}\n");
  REQUIRE_FALSE(extra.ok());
  CHECK(extra.status().message() == "test.yaml:3:14: unknown argument 'seed' for op 'unique'");
}

TEST_CASE("unique: strings", "[ops][unique]") {
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [b, a, b, c, a, \"\"]\n  - unique\n") ==
        Lines{"\"b\"", "\"a\"", "\"c\"", "\"\""});
}

TEST_CASE("unique: each iterator starts with nothing seen", "[ops][unique]") {
  CHECK(IntsOf(Dataset::Range(3).Repeat(2).Unique()) == Ints{0, 1, 2});
  CHECK(IntsOf(Dataset::Range(3).Unique().Repeat(2)) == Ints{0, 1, 2, 0, 1, 2});
}

TEST_CASE("unique: other element specs are InvalidArgument naming the spec", "[ops][unique]") {
  const absl::Status pairs = BuildError(Dataset::Zip({Dataset::Range(2), Dataset::Range(2)}).Unique());
  CHECK(pairs.code() == absl::StatusCode::kInvalidArgument);
  CHECK(pairs.message() ==
        "step 2 (unique): elements must be one scalar int32, int64 or string component (as tf.data's); they "
        "are (TensorSpec(shape=[], dtype=int64), TensorSpec(shape=[], dtype=int64))");
  CHECK(BuildError(Dataset::Range(4).Batch(2).Unique()).message() ==
        "step 3 (unique): elements must be one scalar int32, int64 or string component (as tf.data's); they "
        "are TensorSpec(shape=[?], dtype=int64)");
  CHECK(BuildError(Dataset::Range(4).Map("cast", {{"dtype", "float32"}}).Unique()).message() ==
        "step 3 (unique): elements must be one scalar int32, int64 or string component (as tf.data's); they "
        "are TensorSpec(shape=[], dtype=float32)");
}

TEST_CASE("unique: cardinality", "[ops][unique][cardinality]") {
  CHECK(MustBuild(Dataset::Range(5).Unique())->Cardinality() == kUnknownCardinality);
  CHECK(MustBuild(Dataset::Range(5).Repeat().Unique())->Cardinality() == kInfiniteCardinality);
  CHECK(MustBuild(Dataset::Range(0).Unique())->Cardinality() == 0);
}

TEST_CASE("unique: a checkpoint records the values seen", "[ops][unique][checkpoint]") {
  for (const bool strings : {false, true}) {
    INFO("strings: " << strings);
    // 40 elements of 13 values, shuffled.
    std::vector<std::string> words;
    for (int i = 0; i < 40; ++i) words.push_back("w" + std::to_string(i % 13));
    const Dataset input = strings ? Dataset::FromTensorSlices({Tensor::FromVector<std::string>(words)})
                                  : Dataset::Range(40).Map("mod", {{"value", 13}});
    const Dataset unique = input.Shuffle(10, 4).Unique();
    absl::StatusOr<Iterator> first = unique.MakeIterator();
    REQUIRE(first.ok());
    std::vector<std::string> before;
    for (int i = 0; i < 6; ++i) {
      absl::StatusOr<std::optional<Element>> next = first->GetNextAsOptional();
      REQUIRE(next.ok());
      REQUIRE(next->has_value());
      before.push_back((*next)->DebugString());
    }
    absl::StatusOr<std::string> state = first->Save();
    REQUIRE(state.ok());
    absl::StatusOr<Iterator> restored = unique.MakeIterator(*state);
    REQUIRE(restored.ok());
    std::vector<std::string> after;
    while (true) {
      absl::StatusOr<std::optional<Element>> next = restored->GetNextAsOptional();
      REQUIRE(next.ok());
      if (!next->has_value()) break;
      after.push_back((*next)->DebugString());
    }
    // 13 values in all: the 7 not seen before the save, none again.
    CHECK(after.size() == 7);
    for (const std::string& seen : before) CHECK(std::find(after.begin(), after.end(), seen) == after.end());
  }
}

}  // namespace
}  // namespace sluice
