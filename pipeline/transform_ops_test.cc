// Tests of the element-order transforms: filter, take, skip, repeat, shard,
// enumerate, shuffle and prefetch (transform_ops.cc), and unbatch, rebatch
// and padded_batch (batching_ops.cc).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::BuildError;
using testing::IntsOf;
using testing::JsonOf;
using testing::MustBuild;
using testing::Yaml;

using Catch::Matchers::Contains;
using Lines = std::vector<std::string>;
using Ints = std::vector<int64_t>;

absl::Status YamlError(const std::string& text) {
  absl::StatusOr<Lines> lines = testing::RunYaml(text);
  REQUIRE_FALSE(lines.ok());
  return lines.status();
}

int64_t CardinalityOf(const Dataset& dataset) { return MustBuild(dataset)->Cardinality(); }

Ints Iota(int64_t begin, int64_t end) {
  Ints values(static_cast<size_t>(end - begin));
  std::iota(values.begin(), values.end(), begin);
  return values;
}

Ints Sorted(Ints values) {
  std::sort(values.begin(), values.end());
  return values;
}

// Variable-length uint8 vectors: "a" -> [97], "bb" -> [98, 98], ...
const char kRagged[] =
    "pipeline:\n"
    "  - from_tensor_slices: [a, bb, ccc, d]\n"
    "  - map: {fn: decode_raw, dtype: uint8}\n";

// ---------------------------------------------------------------- filter

TEST_CASE("transform_ops: filter keeps elements where the predicate holds", "[ops][filter]") {
  CHECK(Yaml("pipeline:\n  - range: 10\n  - filter: {fn: less, value: 4}\n") == Lines{"0", "1", "2", "3"});
  CHECK(JsonOf(Dataset::Range(10).Map("mod", {{"value", 3}}).Filter("equal", {{"value", 1}})) ==
        Lines{"1", "1", "1"});
  CHECK(JsonOf(Dataset::Range(10).Filter("greater_equal", {{"value", 7}})) == Lines{"7", "8", "9"});
  CHECK(JsonOf(Dataset::Range(10).Filter("greater", {{"value", 100}})).empty());
}

TEST_CASE("transform_ops: filter on a named component", "[ops][filter]") {
  CHECK(Yaml("pipeline:\n"
             "  - from_tensor_slices: {x: [1, 2, 3], y: [a, b, c]}\n"
             "  - filter: {fn: not_equal, value: b, component: y}\n") ==
        Lines{"{\"x\": 1, \"y\": \"a\"}", "{\"x\": 3, \"y\": \"c\"}"});
}

TEST_CASE("transform_ops: filter with a non-boolean predicate is an error", "[ops][filter]") {
  absl::Status status = BuildError(Dataset::Range(3).Filter("square"));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() ==
        "step 2 (filter): predicate 'square' must return one bool scalar, but returns "
        "TensorSpec(shape=[], dtype=int64)");
}

// ---------------------------------------------------------------- take_while

TEST_CASE("transform_ops: take_while, tf.data's example", "[ops][take_while]") {
  // tf.data: range(10).take_while(lambda x: x < 5).
  CHECK(testing::IntsOf(Dataset::Range(10).TakeWhile("less", {{"value", 5}})) ==
        std::vector<int64_t>{0, 1, 2, 3, 4});
  // It ends at the first refused element, where filter would go on.
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [1, 2, 7, 3, 9, 1]\n"
             "  - take_while: {predicate: less, value: 5}\n") == Lines{"1", "2"});
  CHECK(testing::IntsOf(Dataset::Range(10).Repeat().TakeWhile("less", {{"value", 3}})) ==
        std::vector<int64_t>{0, 1, 2});
  CHECK(testing::MustBuild(Dataset::Range(10).TakeWhile("less", {{"value", 5}}))->Cardinality() ==
        kUnknownCardinality);
  const absl::Status status = BuildError(Dataset::Range(3).TakeWhile("square"));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() ==
        "step 2 (take_while): predicate 'square' must return one bool scalar, but returns "
        "TensorSpec(shape=[], dtype=int64)");
  CHECK(BuildError(Dataset::Range(3).TakeWhile("no_such_function")).message() ==
        "step 2 (take_while): unknown function 'no_such_function'");
}

// ---------------------------------------------------------------- take / skip

TEST_CASE("transform_ops: take", "[ops][take]") {
  CHECK(Yaml("pipeline:\n  - range: 10\n  - take: 3\n") == Lines{"0", "1", "2"});
  CHECK(IntsOf(Dataset::Range(5).Take(0)).empty());
  CHECK(IntsOf(Dataset::Range(5).Take(-1)) == Iota(0, 5));
  CHECK(IntsOf(Dataset::Range(5).Take(20)) == Iota(0, 5));
  CHECK(IntsOf(Dataset::Range(3).Repeat().Take(7)) == Ints{0, 1, 2, 0, 1, 2, 0});
  // The YAML default count is -1: everything.
  CHECK(Yaml("pipeline:\n  - range: 4\n  - take\n") == Lines{"0", "1", "2", "3"});
}

TEST_CASE("transform_ops: skip", "[ops][skip]") {
  CHECK(Yaml("pipeline:\n  - range: 5\n  - skip: 3\n") == Lines{"3", "4"});
  CHECK(IntsOf(Dataset::Range(5).Skip(0)) == Iota(0, 5));
  CHECK(IntsOf(Dataset::Range(5).Skip(-1)).empty());
  CHECK(IntsOf(Dataset::Range(5).Skip(5)).empty());
  CHECK(IntsOf(Dataset::Range(5).Skip(10)).empty());
  CHECK(IntsOf(Dataset::Range(3).Repeat().Skip(2).Take(4)) == Ints{2, 0, 1, 2});
}

// ---------------------------------------------------------------- repeat

TEST_CASE("transform_ops: repeat", "[ops][repeat]") {
  CHECK(IntsOf(Dataset::Range(3).Repeat(0)).empty());
  CHECK(IntsOf(Dataset::Range(3).Repeat(1)) == Ints{0, 1, 2});
  CHECK(IntsOf(Dataset::Range(3).Repeat(2)) == Ints{0, 1, 2, 0, 1, 2});
  CHECK(Yaml("pipeline:\n  - range: 3\n  - repeat: 2\n") == Lines{"0", "1", "2", "0", "1", "2"});
  CHECK(IntsOf(Dataset::Range(3).Repeat(-1).Take(8)) == Ints{0, 1, 2, 0, 1, 2, 0, 1});
  CHECK(Yaml("pipeline:\n  - range: 2\n  - repeat\n  - take: 5\n") == Lines{"0", "1", "0", "1", "0"});
}

TEST_CASE("transform_ops: repeat of an empty dataset terminates", "[ops][repeat]") {
  CHECK(IntsOf(Dataset::Range(0).Repeat()).empty());
  CHECK(IntsOf(Dataset::Range(0).Repeat(5)).empty());
  // Unknown cardinality, so nothing refuses to collect it: it must end.
  const Dataset none = Dataset::Range(5).Filter("greater", {{"value", 10}}).Repeat();
  CHECK(CardinalityOf(none) == kUnknownCardinality);
  CHECK(IntsOf(none).empty());
}

TEST_CASE("transform_ops: repeat with count below -1 is an error", "[ops][repeat]") {
  absl::Status status = BuildError(Dataset::Range(3).Repeat(-2));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 2 (repeat): count must be >= -1 (-1 repeats forever)");
}

// ---------------------------------------------------------------- shard

TEST_CASE("transform_ops: shard keeps every num_shards-th element", "[ops][shard]") {
  CHECK(IntsOf(Dataset::Range(10).Shard(3, 0)) == Ints{0, 3, 6, 9});
  CHECK(IntsOf(Dataset::Range(10).Shard(3, 1)) == Ints{1, 4, 7});
  CHECK(IntsOf(Dataset::Range(10).Shard(3, 2)) == Ints{2, 5, 8});
  CHECK(IntsOf(Dataset::Range(10).Shard(1, 0)) == Iota(0, 10));
  CHECK(IntsOf(Dataset::Range(2).Shard(4, 3)).empty());
  CHECK(Yaml("pipeline:\n  - range: 7\n  - shard: {num_shards: 2, index: 1}\n") == Lines{"1", "3", "5"});
  CHECK(CardinalityOf(Dataset::Range(10).Shard(3, 0)) == 4);
  CHECK(CardinalityOf(Dataset::Range(10).Shard(3, 1)) == 3);
  CHECK(CardinalityOf(Dataset::Range(10).Shard(3, 2)) == 3);
  CHECK(CardinalityOf(Dataset::Range(2).Shard(4, 3)) == 0);
}

TEST_CASE("transform_ops: shard with an index out of range is an error", "[ops][shard]") {
  absl::Status high = BuildError(Dataset::Range(10).Shard(3, 3));
  CHECK(high.code() == absl::StatusCode::kInvalidArgument);
  CHECK(high.message() == "step 2 (shard): index must be in [0, 3), got 3");

  absl::Status negative = BuildError(Dataset::Range(10).Shard(3, -1));
  CHECK(negative.code() == absl::StatusCode::kInvalidArgument);
  CHECK(negative.message() == "step 2 (shard): index must be in [0, 3), got -1");

  absl::Status zero = BuildError(Dataset::Range(10).Shard(0, 0));
  CHECK(zero.code() == absl::StatusCode::kInvalidArgument);
  CHECK(zero.message() == "step 2 (shard): num_shards must be > 0, got 0");

  absl::Status yaml = YamlError("pipeline:\n  - range: 10\n  - shard: {num_shards: 2, index: 2}\n");
  CHECK(yaml.code() == absl::StatusCode::kInvalidArgument);
  CHECK(yaml.message() == "test.yaml:3:5: step 2 (shard): index must be in [0, 2), got 2");
}

// ---------------------------------------------------------------- enumerate

TEST_CASE("transform_ops: enumerate prepends a counter", "[ops][enumerate]") {
  CHECK(JsonOf(Dataset::Range(10, 13).Enumerate()) == Lines{"[0, 10]", "[1, 11]", "[2, 12]"});
  CHECK(JsonOf(Dataset::Range(10, 13).Enumerate(5)) == Lines{"[5, 10]", "[6, 11]", "[7, 12]"});
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: {tuple: [[a, b], [1, 2]]}\n  - enumerate: -1\n") ==
        Lines{"[-1, \"a\", 1]", "[0, \"b\", 2]"});
  DatasetPtr dataset = MustBuild(Dataset::Range(3).Enumerate());
  REQUIRE(dataset->element_spec().components.size() == 2);
  CHECK(dataset->element_spec().components[0].dtype == DType::kInt64);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({}));
  CHECK(dataset->Cardinality() == 3);
}

TEST_CASE("transform_ops: enumerate of named elements names the counter index", "[ops][enumerate]") {
  const Dataset named = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({7, 8})}, {"x"}).Enumerate();
  CHECK(JsonOf(named) == Lines{"{\"index\": 0, \"x\": 7}", "{\"index\": 1, \"x\": 8}"});
  CHECK(MustBuild(named)->element_spec().names == std::vector<std::string>{"index", "x"});
}

// ---------------------------------------------------------------- shuffle

TEST_CASE("transform_ops: seeded shuffle is the same across builds", "[ops][shuffle]") {
  const Ints first = IntsOf(Dataset::Range(20).Shuffle(5, 42));
  const Ints second = IntsOf(Dataset::Range(20).Shuffle(5, 42));
  CHECK(first == second);
  CHECK(first != Iota(0, 20));
  CHECK(Sorted(first) == Iota(0, 20));
  // Through YAML: the same definition, so the same order.
  Lines expected;
  for (int64_t v : first) expected.push_back(std::to_string(v));
  CHECK(Yaml("pipeline:\n  - range: 20\n  - shuffle: {buffer_size: 5, seed: 42}\n") == expected);
}

TEST_CASE("transform_ops: shuffle draws only from its buffer", "[ops][shuffle]") {
  // With a buffer of 4, the element at position i is one of the first
  // i + 4 inputs.
  const Ints values = IntsOf(Dataset::Range(100).Shuffle(4, 7));
  REQUIRE(values.size() == 100);
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("position " << i);
    CHECK(values[i] < static_cast<int64_t>(i) + 4);
  }
  CHECK(Sorted(values) == Iota(0, 100));
}

TEST_CASE("transform_ops: shuffle reshuffles each epoch under repeat", "[ops][shuffle]") {
  const Ints values = IntsOf(Dataset::Range(10).Shuffle(10, 3).Repeat(2));
  REQUIRE(values.size() == 20);
  const Ints epoch1(values.begin(), values.begin() + 10);
  const Ints epoch2(values.begin() + 10, values.end());
  CHECK(epoch1 != epoch2);
  CHECK(Sorted(epoch1) == Iota(0, 10));
  CHECK(Sorted(epoch2) == Iota(0, 10));
  // Two builds repeat the same sequence of epochs.
  CHECK(IntsOf(Dataset::Range(10).Shuffle(10, 3).Repeat(2)) == values);
}

TEST_CASE("transform_ops: shuffle reshuffles for each new iterator", "[ops][shuffle]") {
  DatasetPtr dataset = MustBuild(Dataset::Range(10).Shuffle(10, 11));
  absl::StatusOr<std::vector<Element>> first = CollectElements(*dataset);
  absl::StatusOr<std::vector<Element>> second = CollectElements(*dataset);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(testing::Int64Values(*first) != testing::Int64Values(*second));
  CHECK(Sorted(testing::Int64Values(*second)) == Iota(0, 10));
}

TEST_CASE("transform_ops: shuffle without reshuffling repeats the same order", "[ops][shuffle]") {
  for (const Dataset& dataset :
       {Dataset::Range(10).Shuffle(10, 5, /*reshuffle_each_iteration=*/false).Repeat(3),
        Dataset::Range(10).Shuffle(10, std::nullopt, false).Repeat(3)}) {
    const Ints values = IntsOf(dataset);
    REQUIRE(values.size() == 30);
    const Ints epoch1(values.begin(), values.begin() + 10);
    CHECK(Ints(values.begin() + 10, values.begin() + 20) == epoch1);
    CHECK(Ints(values.begin() + 20, values.end()) == epoch1);
    CHECK(Sorted(epoch1) == Iota(0, 10));
  }
  const Lines yaml = Yaml(
      "pipeline:\n"
      "  - range: 6\n"
      "  - shuffle: {buffer_size: 6, seed: 9, reshuffle_each_iteration: false}\n"
      "  - repeat: 2\n");
  REQUIRE(yaml.size() == 12);
  CHECK(Lines(yaml.begin(), yaml.begin() + 6) == Lines(yaml.begin() + 6, yaml.end()));
}

TEST_CASE("transform_ops: shuffle with buffer_size 1 keeps the order", "[ops][shuffle]") {
  CHECK(IntsOf(Dataset::Range(10).Shuffle(1, 123)) == Iota(0, 10));
  CHECK(IntsOf(Dataset::Range(10).Shuffle(1)) == Iota(0, 10));
}

TEST_CASE("transform_ops: shuffle with buffer_size 0 is an error", "[ops][shuffle]") {
  absl::Status status = BuildError(Dataset::Range(10).Shuffle(0, 1));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 2 (shuffle): buffer_size must be > 0, got 0");
}

// ---------------------------------------------------------------- unbatch

TEST_CASE("transform_ops: unbatch splits batches into rows", "[ops][unbatch]") {
  CHECK(IntsOf(Dataset::Range(7).Batch(3).Unbatch()) == Iota(0, 7));
  CHECK(Yaml("pipeline:\n  - from_tensors: [[1, 2], [3, 4]]\n  - unbatch\n") == Lines{"[1, 2]", "[3, 4]"});
  CHECK(Yaml("pipeline:\n"
             "  - from_tensor_slices: {x: [[1, 2], [3, 4]], y: [[a, b], [c, d]]}\n"
             "  - unbatch\n") == Lines{"{\"x\": 1, \"y\": \"a\"}", "{\"x\": 2, \"y\": \"b\"}",
                                       "{\"x\": 3, \"y\": \"c\"}", "{\"x\": 4, \"y\": \"d\"}"});
  DatasetPtr dataset = MustBuild(Dataset::Range(7).Batch(3, {.drop_remainder = true}).Unbatch());
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({}));
}

TEST_CASE("transform_ops: unbatch errors", "[ops][unbatch]") {
  absl::Status scalar = BuildError(Dataset::Range(3).Unbatch());
  CHECK(scalar.code() == absl::StatusCode::kInvalidArgument);
  CHECK(scalar.message() == "step 2 (unbatch): component 0 is a scalar; it needs a batch dimension");

  absl::StatusOr<DatasetPtr> rows =
      testing::DatasetFromYaml("pipeline:\n  - from_tensors: {tuple: [[1, 2], [1, 2, 3]]}\n  - unbatch\n");
  REQUIRE(rows.ok());
  absl::StatusOr<std::vector<Element>> elements = CollectElements(**rows);
  REQUIRE_FALSE(elements.ok());
  CHECK(elements.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(elements.status().message() == "unbatch: components have 2 and 3 rows");
}

// ---------------------------------------------------------------- rebatch

TEST_CASE("transform_ops: rebatch regroups rows across input batches", "[ops][rebatch]") {
  CHECK(JsonOf(Dataset::Range(10).Batch(3).Rebatch(4)) == Lines{"[0, 1, 2, 3]", "[4, 5, 6, 7]", "[8, 9]"});
  CHECK(JsonOf(Dataset::Range(10).Batch(3).Rebatch(2)) ==
        Lines{"[0, 1]", "[2, 3]", "[4, 5]", "[6, 7]", "[8, 9]"});
  CHECK(JsonOf(Dataset::Range(10).Batch(3).Rebatch(10)) == Lines{"[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"});
  CHECK(JsonOf(Dataset::Range(10).Batch(3).Rebatch(20)) == Lines{"[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"});
  CHECK(JsonOf(Dataset::Range(4).Batch(3).Rebatch(1)) == Lines{"[0]", "[1]", "[2]", "[3]"});
  CHECK(Yaml("pipeline:\n"
             "  - from_tensor_slices: [[1, 2], [3, 4], [5, 6]]\n"
             "  - batch: 2\n"
             "  - rebatch: 3\n") == Lines{"[[1, 2], [3, 4], [5, 6]]"});
  CHECK(Yaml("pipeline:\n"
             "  - from_tensor_slices: {x: [1, 2, 3], s: [a, b, c]}\n"
             "  - batch: 2\n"
             "  - rebatch: 3\n") == Lines{"{\"x\": [1, 2, 3], \"s\": [\"a\", \"b\", \"c\"]}"});
}

TEST_CASE("transform_ops: rebatch with drop_remainder", "[ops][rebatch]") {
  CHECK(JsonOf(Dataset::Range(10).Batch(3).Rebatch(4, true)) == Lines{"[0, 1, 2, 3]", "[4, 5, 6, 7]"});
  CHECK(JsonOf(Dataset::Range(10).Batch(3).Rebatch(5, true)) == Lines{"[0, 1, 2, 3, 4]", "[5, 6, 7, 8, 9]"});
  CHECK(JsonOf(Dataset::Range(3).Batch(2).Rebatch(4, true)).empty());
  DatasetPtr dropped = MustBuild(Dataset::Range(10).Batch(3).Rebatch(4, true));
  CHECK(dropped->element_spec().components[0].shape == PartialShape::Known({4}));
  DatasetPtr kept = MustBuild(Dataset::Range(10).Batch(3).Rebatch(4));
  CHECK(kept->element_spec().components[0].shape == PartialShape::Known({kUnknownDim}));
}

TEST_CASE("transform_ops: rebatch errors", "[ops][rebatch]") {
  absl::Status scalar = BuildError(Dataset::Range(3).Rebatch(2));
  CHECK(scalar.code() == absl::StatusCode::kInvalidArgument);
  CHECK(scalar.message() == "step 2 (rebatch): component 0 is a scalar; it needs a batch dimension");
  absl::Status zero = BuildError(Dataset::Range(3).Batch(2).Rebatch(0));
  CHECK(zero.code() == absl::StatusCode::kInvalidArgument);
  CHECK(zero.message() == "step 3 (rebatch): batch_size must be > 0, got 0");
}

// ---------------------------------------------------------------- padded_batch

TEST_CASE("transform_ops: padded_batch pads to the longest by default", "[ops][padded_batch]") {
  CHECK(Yaml(std::string(kRagged) + "  - padded_batch: 2\n") ==
        Lines{"[[97, 0], [98, 98]]", "[[99, 99, 99], [100, 0, 0]]"});
  CHECK(Yaml(std::string(kRagged) + "  - padded_batch: {batch_size: 3}\n") ==
        Lines{"[[97, 0, 0], [98, 98, 0], [99, 99, 99]]", "[[100]]"});
  absl::StatusOr<DatasetPtr> dataset =
      testing::DatasetFromYaml(std::string(kRagged) + "  - padded_batch: 2\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().components[0].shape == PartialShape::Known({kUnknownDim, kUnknownDim}));
  CHECK((*dataset)->element_spec().components[0].dtype == DType::kUInt8);
  CHECK((*dataset)->Cardinality() == 2);
}

TEST_CASE("transform_ops: padded_batch with -1 padded shapes", "[ops][padded_batch]") {
  CHECK(Yaml(std::string(kRagged) + "  - padded_batch: {batch_size: 2, padded_shapes: [[-1]]}\n") ==
        Lines{"[[97, 0], [98, 98]]", "[[99, 99, 99], [100, 0, 0]]"});
}

TEST_CASE("transform_ops: padded_batch with explicit sizes", "[ops][padded_batch]") {
  CHECK(Yaml(std::string(kRagged) + "  - padded_batch: {batch_size: 2, padded_shapes: [[4]]}\n") ==
        Lines{"[[97, 0, 0, 0], [98, 98, 0, 0]]", "[[99, 99, 99, 0], [100, 0, 0, 0]]"});
  absl::StatusOr<DatasetPtr> dataset = testing::DatasetFromYaml(
      std::string(kRagged) +
      "  - padded_batch: {batch_size: 2, padded_shapes: [[4]], drop_remainder: true}\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().components[0].shape == PartialShape::Known({2, 4}));
}

TEST_CASE("transform_ops: padded_batch with padding values", "[ops][padded_batch]") {
  CHECK(Yaml(std::string(kRagged) + "  - padded_batch: {batch_size: 2, padding_values: [7]}\n") ==
        Lines{"[[97, 7], [98, 98]]", "[[99, 99, 99], [100, 7, 7]]"});
  CHECK(Yaml(std::string(kRagged) +
             "  - padded_batch: {batch_size: 4, padded_shapes: [[5]], padding_values: [1]}\n") ==
        Lines{"[[97, 1, 1, 1, 1], [98, 98, 1, 1, 1], [99, 99, 99, 1, 1], [100, 1, 1, 1, 1]]"});
}

TEST_CASE("transform_ops: padded_batch of tuples pads each component", "[ops][padded_batch]") {
  const std::string source =
      "pipeline:\n"
      "  - from_tensor_slices: {tuple: [[a, bb, ccc], [1, 2, 3]]}\n"
      "  - map: {fn: decode_raw, dtype: uint8, component: 0}\n";
  CHECK(Yaml(source + "  - padded_batch: 2\n") ==
        Lines{"[[[97, 0], [98, 98]], [1, 2]]", "[[[99, 99, 99]], [3]]"});
  CHECK(Yaml(source +
             "  - padded_batch: {batch_size: 3, padded_shapes: [[3], []], padding_values: [5, 0]}\n") ==
        Lines{"[[[97, 5, 5], [98, 98, 5], [99, 99, 99]], [1, 2, 3]]"});
}

TEST_CASE("transform_ops: padded_batch with drop_remainder", "[ops][padded_batch]") {
  CHECK(Yaml(std::string(kRagged) + "  - padded_batch: {batch_size: 3, drop_remainder: true}\n") ==
        Lines{"[[97, 0, 0], [98, 98, 0], [99, 99, 99]]"});
  absl::StatusOr<DatasetPtr> dataset = testing::DatasetFromYaml(
      std::string(kRagged) + "  - padded_batch: {batch_size: 3, drop_remainder: true}\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->Cardinality() == 1);
}

TEST_CASE("transform_ops: padded_batch with a too small padded shape fails", "[ops][padded_batch]") {
  absl::StatusOr<DatasetPtr> dataset = testing::DatasetFromYaml(
      std::string(kRagged) + "  - padded_batch: {batch_size: 2, padded_shapes: [[2]]}\n");
  REQUIRE(dataset.ok());
  absl::StatusOr<std::unique_ptr<IteratorBase>> it = (*dataset)->MakeIterator(IteratorContext{});
  REQUIRE(it.ok());
  Element element;
  bool end = true;
  REQUIRE((*it)->GetNext(&element, &end).ok());
  CHECK_FALSE(end);
  CHECK(ElementToJson(element) == "[[97, 0], [98, 98]]");
  absl::Status status = (*it)->GetNext(&element, &end);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() ==
        "padded_batch: component 0 has size 3 in dimension 0, larger than its padded shape [2]");
}

TEST_CASE("transform_ops: padded_batch argument errors", "[ops][padded_batch]") {
  absl::Status rank =
      YamlError(std::string(kRagged) + "  - padded_batch: {batch_size: 2, padded_shapes: [[2, 2]]}\n");
  CHECK(rank.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(rank.message()),
             Contains("step 3 (padded_batch): padded shape [2, 2] of component 0 does not match its "
                      "shape [?]"));

  absl::Status count =
      YamlError(std::string(kRagged) + "  - padded_batch: {batch_size: 2, padded_shapes: [[2], [2]]}\n");
  CHECK(count.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(count.message()),
             Contains("step 3 (padded_batch): padded_shapes has 2 shapes for 1 components"));

  absl::Status value =
      YamlError(std::string(kRagged) + "  - padded_batch: {batch_size: 2, padding_values: [x]}\n");
  CHECK(value.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(value.message()),
             Contains("step 3 (padded_batch): padding value of component 0 must be a uint8 scalar"));

  absl::Status size = BuildError(Dataset::Range(3).PaddedBatch(0));
  CHECK(size.code() == absl::StatusCode::kInvalidArgument);
  CHECK(size.message() == "step 2 (padded_batch): batch_size must be > 0, got 0");
}

TEST_CASE("transform_ops: padded_batch of same-shaped elements equals batch", "[ops][padded_batch]") {
  CHECK(JsonOf(Dataset::Range(5).PaddedBatch(2)) == JsonOf(Dataset::Range(5).Batch(2)));
  CHECK(JsonOf(Dataset::Range(5).PaddedBatch(2)) == Lines{"[0, 1]", "[2, 3]", "[4]"});
}

// ---------------------------------------------------------------- prefetch

TEST_CASE("transform_ops: prefetch yields the same elements", "[ops][prefetch]") {
  const Dataset base = Dataset::Range(50).Map("square").Filter("not_equal", {{"value", 49}});
  const Lines expected = JsonOf(base);
  REQUIRE(expected.size() == 49);
  CHECK(JsonOf(base.Prefetch()) == expected);
  CHECK(JsonOf(base.Prefetch(1)) == expected);
  CHECK(JsonOf(base.Prefetch(100)) == expected);
  CHECK(JsonOf(Dataset::Range(0).Prefetch(2)).empty());
  CHECK(Yaml("pipeline:\n  - range: 4\n  - prefetch: 2\n  - batch: 3\n") == Lines{"[0, 1, 2]", "[3]"});
  CHECK(CardinalityOf(base.Prefetch()) == kUnknownCardinality);
  CHECK(CardinalityOf(Dataset::Range(50).Prefetch()) == 50);
}

TEST_CASE("transform_ops: prefetch passes errors through", "[ops][prefetch]") {
  absl::StatusOr<Lines> lines = testing::RunYaml(
      "pipeline:\n"
      "  - from_tensor_slices: [ab, c]\n"
      "  - map: {fn: decode_raw, dtype: int16}\n"
      "  - prefetch: 4\n");
  REQUIRE_FALSE(lines.ok());
  CHECK(lines.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(lines.status().message() == "decode_raw: 1 bytes is not a multiple of the 2-byte int16");
}

TEST_CASE("transform_ops: prefetch with buffer_size 0 is an error", "[ops][prefetch]") {
  absl::Status status = BuildError(Dataset::Range(3).Prefetch(0));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 2 (prefetch): buffer_size must be > 0, or -1 for autotune");
}

// ---------------------------------------------------------------- cardinality

TEST_CASE("transform_ops: cardinality of each transform", "[ops][cardinality]") {
  const Dataset ten = Dataset::Range(10);
  const Dataset infinite = Dataset::Range(10).Repeat();
  const Dataset unknown = Dataset::Range(10).Filter("less", {{"value", 5}});

  CHECK(CardinalityOf(infinite) == kInfiniteCardinality);
  CHECK(CardinalityOf(unknown) == kUnknownCardinality);
  CHECK(CardinalityOf(infinite.Filter("less", {{"value", 5}})) == kInfiniteCardinality);

  CHECK(CardinalityOf(ten.Take(3)) == 3);
  CHECK(CardinalityOf(ten.Take(30)) == 10);
  CHECK(CardinalityOf(ten.Take(-1)) == 10);
  CHECK(CardinalityOf(infinite.Take(7)) == 7);
  CHECK(CardinalityOf(infinite.Take(-1)) == kInfiniteCardinality);
  CHECK(CardinalityOf(unknown.Take(3)) == kUnknownCardinality);

  CHECK(CardinalityOf(ten.Skip(3)) == 7);
  CHECK(CardinalityOf(ten.Skip(30)) == 0);
  CHECK(CardinalityOf(ten.Skip(-1)) == 0);
  CHECK(CardinalityOf(infinite.Skip(3)) == kInfiniteCardinality);
  CHECK(CardinalityOf(unknown.Skip(3)) == kUnknownCardinality);

  CHECK(CardinalityOf(ten.Repeat(3)) == 30);
  CHECK(CardinalityOf(ten.Repeat(0)) == 0);
  CHECK(CardinalityOf(ten.Repeat(-1)) == kInfiniteCardinality);
  CHECK(CardinalityOf(Dataset::Range(0).Repeat(-1)) == 0);
  CHECK(CardinalityOf(unknown.Repeat(2)) == kUnknownCardinality);

  CHECK(CardinalityOf(ten.Shard(4, 1)) == 3);
  CHECK(CardinalityOf(ten.Shard(4, 2)) == 2);
  CHECK(CardinalityOf(infinite.Shard(4, 1)) == kInfiniteCardinality);
  CHECK(CardinalityOf(unknown.Shard(4, 1)) == kUnknownCardinality);

  CHECK(CardinalityOf(ten.Enumerate()) == 10);
  CHECK(CardinalityOf(infinite.Enumerate()) == kInfiniteCardinality);
  CHECK(CardinalityOf(ten.Shuffle(4, 1)) == 10);
  CHECK(CardinalityOf(infinite.Shuffle(4, 1)) == kInfiniteCardinality);
  CHECK(CardinalityOf(unknown.Shuffle(4, 1)) == kUnknownCardinality);
  CHECK(CardinalityOf(ten.Prefetch(2)) == 10);
  CHECK(CardinalityOf(infinite.Prefetch(2)) == kInfiniteCardinality);

  CHECK(CardinalityOf(ten.Batch(4).Unbatch()) == kUnknownCardinality);
  CHECK(CardinalityOf(infinite.Batch(4).Unbatch()) == kInfiniteCardinality);
  CHECK(CardinalityOf(Dataset::Range(0).Batch(4).Unbatch()) == 0);
  CHECK(CardinalityOf(ten.Batch(4).Rebatch(3)) == kUnknownCardinality);
  CHECK(CardinalityOf(infinite.Batch(4).Rebatch(3)) == kInfiniteCardinality);

  CHECK(CardinalityOf(ten.PaddedBatch(3)) == 4);
  CHECK(CardinalityOf(ten.PaddedBatch(3, {}, {}, true)) == 3);
  CHECK(CardinalityOf(infinite.PaddedBatch(3)) == kInfiniteCardinality);
  CHECK(CardinalityOf(unknown.PaddedBatch(3)) == kUnknownCardinality);
}

TEST_CASE("transform_ops: padded_batch past int64 elements fails the read instead of writing past a buffer",
          "[ops][padded_batch][hardening]") {
  // 2^62 rows of 2^62: the element count wrapped and a small buffer was
  // written as a huge one (a segfault).
  absl::StatusOr<Lines> lines = testing::RunYaml(
      "pipeline:\n  - from_tensor_slices: [[1, 2], [3, 4]]\n  - padded_batch: {batch_size: "
      "4611686018427387904, "
      "padded_shapes: [[4611686018427387904]]}\n");
  CHECK(lines.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(lines.status().message() ==
        "step 2 (padded_batch): asked for more memory than can be allocated (a tensor whose element count "
        "overflows int64)");
}

}  // namespace
}  // namespace sluice
