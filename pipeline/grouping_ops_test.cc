// Tests of group_by_window (group_by_window_op.cc) and
// bucket_by_sequence_length (bucket_by_sequence_length_op.cc) with
// tf.data's documented examples, their argument errors, and their saved
// state (the groups they hold) at every position.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"
#include "sluice/proto/checkpoint.pb.h"
#include "tests/testing/checkpoint_util.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::BuildError;
using testing::JsonOf;
using testing::MustBuild;
using testing::MustIterate;
using testing::Yaml;
using Lines = std::vector<std::string>;

Tensor Ints(std::vector<int64_t> values) { return Tensor::FromVector<int64_t>(std::move(values)); }

// One int64 vector element per row, in order: tf.data's
// from_generator(lambda: rows, tf.int64, output_shapes=[None]).
Dataset Sequences(const std::vector<std::vector<int64_t>>& rows) {
  Dataset dataset = Dataset::FromTensors({Ints(rows[0])});
  for (size_t i = 1; i < rows.size(); ++i)
    dataset = dataset.Concatenate(Dataset::FromTensors({Ints(rows[i])}));
  return dataset;
}

// tf.data's bucket_by_sequence_length example elements.
Dataset TfExample() {
  return Sequences({{0}, {1, 2, 3, 4}, {5, 6, 7}, {7, 8, 9, 10, 11}, {13, 14, 15, 16, 19, 20}, {21, 22}});
}

// The window being reduced, row by row (tf.data's reduce_func's dataset).
Dataset Rows() { return Dataset::FromTensorSlices({}); }

// The message of the first error reading `dataset`.
std::string ReadError(const Dataset& dataset) {
  absl::StatusOr<std::vector<Element>> elements = dataset.Collect();
  REQUIRE_FALSE(elements.ok());
  CHECK(elements.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(elements.status().message());
}

// The state after `reads` elements of `dataset`, and the status of
// restoring `edit`ed state into a fresh iterator.
absl::Status RestoreEdited(const Dataset& dataset, int reads, void (*edit)(proto::IteratorState*)) {
  const DatasetPtr built = MustBuild(dataset);
  std::unique_ptr<IteratorBase> it = MustIterate(built);
  for (int i = 0; i < reads; ++i) {
    Element element;
    bool end = false;
    REQUIRE(it->GetNext(&element, &end).ok());
    REQUIRE_FALSE(end);
  }
  proto::IteratorState state;
  REQUIRE(it->Save(&state).ok());
  edit(&state);
  return MustIterate(built)->Restore(state);
}

// ---------------------------------------------------------------- group_by_window

TEST_CASE("group_by_window: tf.data's example, reduced by a flat_map", "[ops][group_by_window]") {
  // tf.data: range(10).group_by_window(key_func=lambda x: x % 2,
  //              reduce_func=lambda key, w: w.batch(5), window_size=5).
  const Dataset grouped = Dataset::Range(10).GroupByWindow("mod", 5, {{"value", 2}});
  CHECK(JsonOf(grouped.FlatMap(Rows().Batch(5))) == Lines{"[0, 2, 4, 6, 8]", "[1, 3, 5, 7, 9]"});
  CHECK(JsonOf(grouped) == Lines{"[0, 2, 4, 6, 8]", "[1, 3, 5, 7, 9]"});
  CHECK(JsonOf(grouped.FlatMap(Rows().Batch(2))) ==
        Lines{"[0, 2]", "[4, 6]", "[8]", "[1, 3]", "[5, 7]", "[9]"});
}

TEST_CASE("group_by_window: a full window comes at once, the rest at the end in key order",
          "[ops][group_by_window]") {
  CHECK(JsonOf(Dataset::Range(10).GroupByWindow("mod", 2, {{"value", 3}})) ==
        Lines{"[0, 3]", "[1, 4]", "[2, 5]", "[6, 9]", "[7]", "[8]"});
  // Keys 0, -1, ..., -4: the groups left come smallest key first, not in
  // the order they were started.
  CHECK(JsonOf(Dataset::Range(5).GroupByWindow("negate", 2)) == Lines{"[4]", "[3]", "[2]", "[1]", "[0]"});
  CHECK(JsonOf(Dataset::Range(4).GroupByWindow("mod", 1, {{"value", 2}})) ==
        Lines{"[0]", "[1]", "[2]", "[3]"});
  CHECK(JsonOf(Dataset::Range(0).GroupByWindow("mod", 3, {{"value", 2}})).empty());
  // Every component is stacked; the key may be one of them.
  const Dataset pairs = Dataset::Zip({Dataset::Range(6).Map("mod", {{"value", 2}}), Dataset::Range(10, 16)});
  CHECK(JsonOf(pairs.GroupByWindow("select", 3, {{"components", 0}})) ==
        Lines{"[[0, 0, 0], [10, 12, 14]]", "[[1, 1, 1], [11, 13, 15]]"});
}

TEST_CASE("group_by_window: spec and cardinality", "[ops][group_by_window]") {
  const Dataset grouped = Dataset::Range(10).GroupByWindow("mod", 5, {{"value", 2}});
  CHECK(MustBuild(grouped)->element_spec().DebugString() == "TensorSpec(shape=[?], dtype=int64)");
  CHECK(MustBuild(grouped)->Cardinality() == kUnknownCardinality);
  CHECK(MustBuild(Dataset::Range(0).GroupByWindow("mod", 5, {{"value", 2}}))->Cardinality() == 0);
  CHECK(MustBuild(Dataset::Range(3).Repeat().GroupByWindow("mod", 5, {{"value", 2}}))->Cardinality() ==
        kInfiniteCardinality);
}

TEST_CASE("group_by_window: argument errors name the step and the argument", "[ops][group_by_window]") {
  const Dataset ten = Dataset::Range(10);
  CHECK(BuildError(ten.GroupByWindow("mod", 0, {{"value", 2}})).message() ==
        "step 2 (group_by_window): window_size must be > 0, got 0");
  CHECK(BuildError(ten.GroupByWindow("mod", int64_t{1} << 30, {{"value", 2}})).message() ==
        "step 2 (group_by_window): window_size must be at most 16777216, got 1073741824");
  CHECK(BuildError(ten.GroupByWindow("", 5)).message() ==
        "step 2 (group_by_window): missing 'key_fn', the function that gives each key");
  CHECK(BuildError(ten.GroupByWindow("modd", 5)).message() ==
        "step 2 (group_by_window): key_fn: unknown function 'modd'; did you mean 'mod'?");
  CHECK(BuildError(ten.GroupByWindow("less", 5, {{"value", 3}})).message() ==
        "step 2 (group_by_window): key_fn 'less' returns TensorSpec(shape=[], dtype=bool), not one int32 or "
        "int64 scalar");
  CHECK(BuildError(ten.Batch(2).GroupByWindow("mod", 5, {{"value", 2}})).message() ==
        "step 3 (group_by_window): key_fn 'mod' returns TensorSpec(shape=[?], dtype=int64), not one int32 or "
        "int64 scalar");
  CHECK(BuildError(Dataset::Zip({ten, ten}).GroupByWindow("mod", 5, {{"value", 2}})).message() ==
        "step 2 (group_by_window): key_fn 'mod' returns (TensorSpec(shape=[], dtype=int64), "
        "TensorSpec(shape=[], "
        "dtype=int64)), not one int32 or int64 scalar");
  // Elements of one window must stack.
  const Dataset ragged =
      Dataset::Zip({Dataset::Range(2).Map("mod", {{"value", 1}}), Sequences({{1}, {2, 3}})});
  CHECK(ReadError(ragged.GroupByWindow("select", 2, {{"components", 0}})) ==
        "group_by_window: cannot batch component 1 of shapes [1] and [2]; use padded_batch");
}

TEST_CASE("group_by_window: YAML form", "[ops][group_by_window][yaml]") {
  const std::string yaml =
      "pipeline:\n"
      "  - range: 10\n"
      "  - group_by_window: {key_fn: mod, value: 2, window_size: 5}\n"
      "  - flat_map: [from_tensor_slices, {batch: 5}]\n";
  CHECK(Yaml(yaml) == Lines{"[0, 2, 4, 6, 8]", "[1, 3, 5, 7, 9]"});
  CHECK(testing::YamlFingerprint(yaml) ==
        Dataset::Range(10).GroupByWindow("mod", 5, {{"value", 2}}).FlatMap(Rows().Batch(5)).Fingerprint());
}

TEST_CASE("group_by_window: resumes with its groups at every position",
          "[ops][group_by_window][checkpoint]") {
  testing::CheckResumesEverywhere(
      Dataset::Range(40).Shuffle(8, 5).GroupByWindow("mod", 3, {{"value", 4}}).Repeat(2));
  testing::CheckResumesEverywhere(Dataset::Range(30)
                                      .Shuffle(6, 1)
                                      .GroupByWindow("mod", 4, {{"value", 7}})
                                      .FlatMap(Rows().Batch(3))
                                      .Repeat(2));
}

TEST_CASE("group_by_window: a malformed state is refused", "[ops][group_by_window][checkpoint]") {
  // After one window of key 0, the group of key 1 holds 1 and 3.
  const Dataset grouped = Dataset::Range(20).GroupByWindow("mod", 3, {{"value", 2}});
  CHECK(RestoreEdited(grouped, 1, [](proto::IteratorState*) {}).ok());
  const absl::Status full = RestoreEdited(grouped, 1, [](proto::IteratorState* state) {
    *state->mutable_inputs(1)->add_elements() = state->inputs(1).elements(0);
  });
  CHECK(full.code() == absl::StatusCode::kInvalidArgument);
  CHECK(full.message() ==
        "the saved iterator state is malformed: group_by_window's group 1 holds 3 elements, not 1 to 2");
  const absl::Status twice =
      RestoreEdited(grouped, 1, [](proto::IteratorState* state) { *state->add_inputs() = state->inputs(1); });
  CHECK(twice.message() == "the saved iterator state is malformed: group_by_window's group 1 is saved twice");
  const absl::Status no_key = RestoreEdited(grouped, 1, [](proto::IteratorState* state) {
    state->mutable_inputs(1)->mutable_ints()->erase("key");
  });
  CHECK(no_key.message() == "the saved iterator state is malformed: 'key' is missing");
}

// ---------------------------------------------------------------- bucket_by_sequence_length

TEST_CASE("bucket_by_sequence_length: tf.data's examples", "[ops][bucket_by_sequence_length]") {
  CHECK(JsonOf(TfExample().BucketBySequenceLength({3, 5}, {2, 2, 2})) ==
        Lines{"[[1, 2, 3, 4], [5, 6, 7, 0]]", "[[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]]",
              "[[0, 0], [21, 22]]"});
  // Padded to the bucket's boundary - 1, with -1.
  BucketOptions to_boundary;
  to_boundary.pad_to_bucket_boundary = true;
  to_boundary.padding_values = {Tensor::Scalar<int64_t>(-1)};
  CHECK(JsonOf(TfExample().BucketBySequenceLength({4, 7}, {2, 2, 2}, to_boundary)) ==
        Lines{"[[0, -1, -1], [5, 6, 7]]", "[[1, 2, 3, 4, -1, -1], [7, 8, 9, 10, 11, -1]]", "[[21, 22, -1]]",
              "[[13, 14, 15, 16, 19, 20]]"});
  // drop_remainder drops the buckets left at the end.
  to_boundary.drop_remainder = true;
  CHECK(JsonOf(TfExample().BucketBySequenceLength({4, 7}, {2, 2, 2}, to_boundary)) ==
        Lines{"[[0, -1, -1], [5, 6, 7]]", "[[1, 2, 3, 4, -1, -1], [7, 8, 9, 10, 11, -1]]"});
}

TEST_CASE("bucket_by_sequence_length: buckets, batch sizes and padding", "[ops][bucket_by_sequence_length]") {
  // No boundaries: one bucket, padded_batch's batches.
  CHECK(JsonOf(TfExample().BucketBySequenceLength({}, {4})) ==
        Lines{"[[0, 0, 0, 0, 0], [1, 2, 3, 4, 0], [5, 6, 7, 0, 0], [7, 8, 9, 10, 11]]",
              "[[13, 14, 15, 16, 19, 20], [21, 22, 0, 0, 0, 0]]"});
  // Each bucket its own batch size; the buckets left come in bucket order.
  CHECK(JsonOf(TfExample().BucketBySequenceLength({2, 5}, {1, 3, 1})) ==
        Lines{"[[0]]", "[[7, 8, 9, 10, 11]]", "[[13, 14, 15, 16, 19, 20]]",
              "[[1, 2, 3, 4], [5, 6, 7, 0], [21, 22, 0, 0]]"});
  CHECK(JsonOf(TfExample().BucketBySequenceLength({2, 5}, {2, 2, 3})) ==
        Lines{"[[1, 2, 3, 4], [5, 6, 7, 0]]", "[[0]]", "[[21, 22]]",
              "[[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]]"});
  // padded_shapes and padding_values as padded_batch's.
  BucketOptions padded;
  padded.padded_shapes = {{6}};
  padded.padding_values = {Tensor::Scalar<int64_t>(9)};
  CHECK(JsonOf(TfExample().BucketBySequenceLength({3}, {2, 2}, padded)) ==
        Lines{"[[1, 2, 3, 4, 9, 9], [5, 6, 7, 9, 9, 9]]", "[[7, 8, 9, 10, 11, 9], [13, 14, 15, 16, 19, 20]]",
              "[[0, 9, 9, 9, 9, 9], [21, 22, 9, 9, 9, 9]]"});
  // no_padding: plain batches, whose rows must have one shape.
  BucketOptions plain;
  plain.no_padding = true;
  CHECK(JsonOf(Sequences({{1, 2}, {5}, {3, 4}, {6}}).BucketBySequenceLength({2}, {2, 2}, plain)) ==
        Lines{"[[1, 2], [3, 4]]", "[[5], [6]]"});
  CHECK(ReadError(Sequences({{1, 2}, {3, 4, 5}}).BucketBySequenceLength({}, {2}, plain)) ==
        "bucket_by_sequence_length: cannot batch component 0 of shapes [2] and [3]; use padded_batch");
  CHECK(MustBuild(TfExample().BucketBySequenceLength({3, 5}, {2, 2, 2}))->element_spec().DebugString() ==
        "TensorSpec(shape=[?, ?], dtype=int64)");
  CHECK(MustBuild(TfExample().BucketBySequenceLength({3, 5}, {2, 2, 2}))->Cardinality() ==
        kUnknownCardinality);
}

TEST_CASE("bucket_by_sequence_length: the length from length_fn or from another component",
          "[ops][bucket_by_sequence_length]") {
  // The length is the first component; the sequences are all of length 1.
  const Dataset pairs = Dataset::Zip(
      {Dataset::FromTensorSlices({Ints({5, 1, 5, 1, 2, 9})}), Sequences({{1}, {2}, {3}, {4}, {5}, {6}})});
  BucketOptions by_fn;
  by_fn.length_fn = "select";
  by_fn.length_fn_args = {{"components", 0}};
  CHECK(JsonOf(pairs.BucketBySequenceLength({3}, {2, 2}, by_fn)) ==
        Lines{"[[5, 5], [[1], [3]]]", "[[1, 1], [[2], [4]]]", "[[2], [[5]]]", "[[9], [[6]]]"});
  // The length of component 1, the sequence.
  const Dataset tagged = Dataset::Zip({Dataset::Range(6), TfExample()});
  BucketOptions second;
  second.component = 1;
  CHECK(JsonOf(tagged.BucketBySequenceLength({3, 5}, {2, 2, 2}, second)) ==
        Lines{"[[1, 2], [[1, 2, 3, 4], [5, 6, 7, 0]]]",
              "[[3, 4], [[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]]]", "[[0, 5], [[0, 0], [21, 22]]]"});
}

TEST_CASE("bucket_by_sequence_length: pad_to_bucket_boundary refuses a length past the last boundary",
          "[ops][bucket_by_sequence_length]") {
  BucketOptions to_boundary;
  to_boundary.pad_to_bucket_boundary = true;
  CHECK(ReadError(TfExample().BucketBySequenceLength({4, 6}, {2, 2, 2}, to_boundary)) ==
        "bucket_by_sequence_length: an element of length 6 is not below the last bucket boundary, 6, which "
        "pad_to_bucket_boundary needs");
  // A known dimension keeps its size; an unknown one pads to the boundary - 1.
  const Dataset matrices =
      Dataset::FromTensors({*Tensor::FromVector<int64_t>({1, 2}, {1, 2})})
          .Concatenate(Dataset::FromTensors({*Tensor::FromVector<int64_t>({3, 4, 5, 6}, {2, 2})}));
  CHECK(JsonOf(matrices.BucketBySequenceLength({4}, {2, 1}, to_boundary)) ==
        Lines{"[[[1, 2], [0, 0], [0, 0]], [[3, 4], [5, 6], [0, 0]]]"});
}

TEST_CASE("bucket_by_sequence_length: argument errors name the step and the argument",
          "[ops][bucket_by_sequence_length]") {
  const Dataset seqs = TfExample();
  CHECK(BuildError(seqs.BucketBySequenceLength({3, 5}, {2, 2})).message() ==
        "step 7 (bucket_by_sequence_length): bucket_batch_sizes needs 3 sizes, one more than the 2 "
        "bucket_boundaries, got 2");
  CHECK(BuildError(seqs.BucketBySequenceLength({}, {})).message() ==
        "step 7 (bucket_by_sequence_length): bucket_batch_sizes needs 1 sizes, one more than the 0 "
        "bucket_boundaries, got 0");
  CHECK(BuildError(seqs.BucketBySequenceLength({3, 5}, {2, 0, 2})).message() ==
        "step 7 (bucket_by_sequence_length): bucket_batch_sizes must be > 0, got 0");
  CHECK(BuildError(seqs.BucketBySequenceLength({3}, {2, int64_t{1} << 30})).message() ==
        "step 7 (bucket_by_sequence_length): bucket_batch_sizes must be at most 16777216, got 1073741824");
  CHECK(BuildError(seqs.BucketBySequenceLength({5, 3}, {2, 2, 2})).message() ==
        "step 7 (bucket_by_sequence_length): bucket_boundaries must be > 0 and strictly increasing, got [5, "
        "3]");
  CHECK(BuildError(seqs.BucketBySequenceLength({3, 3}, {2, 2, 2})).message() ==
        "step 7 (bucket_by_sequence_length): bucket_boundaries must be > 0 and strictly increasing, got [3, "
        "3]");
  CHECK(BuildError(seqs.BucketBySequenceLength({0}, {2, 2})).message() ==
        "step 7 (bucket_by_sequence_length): bucket_boundaries must be > 0 and strictly increasing, got [0]");
  BucketOptions options;
  options.pad_to_bucket_boundary = true;
  CHECK(BuildError(seqs.BucketBySequenceLength({}, {2}, options)).message() ==
        "step 7 (bucket_by_sequence_length): pad_to_bucket_boundary needs bucket_boundaries, every length "
        "being "
        "below the last");
  options = {};
  options.no_padding = true;
  options.padding_values = {Tensor::Scalar<int64_t>(-1)};
  CHECK(BuildError(seqs.BucketBySequenceLength({3}, {2, 2}, options)).message() ==
        "step 7 (bucket_by_sequence_length): no_padding takes no pad_to_bucket_boundary, padded_shapes or "
        "padding_values");
  options = {};
  options.component = 1;
  CHECK(BuildError(seqs.BucketBySequenceLength({3}, {2, 2}, options)).message() ==
        "step 7 (bucket_by_sequence_length): component 1 is out of range for elements of 1 components "
        "(TensorSpec(shape=[?], dtype=int64))");
  CHECK(BuildError(Dataset::Range(4).BucketBySequenceLength({3}, {2, 2})).message() ==
        "step 2 (bucket_by_sequence_length): component 0 is a scalar, TensorSpec(shape=[], dtype=int64); its "
        "length is its first dimension (or give length_fn)");
  options = {};
  options.length_fn = "negate";
  options.component = 1;
  CHECK(BuildError(seqs.BucketBySequenceLength({3}, {2, 2}, options)).message() ==
        "step 7 (bucket_by_sequence_length): give length_fn or component, not both");
  options.component = 0;
  CHECK(BuildError(seqs.BucketBySequenceLength({3}, {2, 2}, options)).message() ==
        "step 7 (bucket_by_sequence_length): length_fn 'negate' returns TensorSpec(shape=[?], dtype=int64), "
        "not "
        "one int32 or int64 scalar");
  // padded_batch's own checks, under this op's name.
  options = {};
  options.padded_shapes = {{4}, {4}};
  CHECK(BuildError(seqs.BucketBySequenceLength({3}, {2, 2}, options)).message() ==
        "step 7 (bucket_by_sequence_length): padded_shapes has 2 shapes for 1 components");
  options = {};
  options.padding_values = {Tensor::StringScalar("x")};
  CHECK(BuildError(seqs.BucketBySequenceLength({3}, {2, 2}, options)).message() ==
        "step 7 (bucket_by_sequence_length): padding value of component 0 must be a int64 scalar");
  // A padded shape too small for a batch fails that batch.
  options = {};
  options.padded_shapes = {{3}};
  CHECK(ReadError(seqs.BucketBySequenceLength({3}, {2, 2}, options)) ==
        "bucket_by_sequence_length: component 0 has size 4 in dimension 0, larger than its padded shape [3]");
}

TEST_CASE("bucket_by_sequence_length: YAML form", "[ops][bucket_by_sequence_length][yaml]") {
  const std::string yaml =
      "pipeline:\n"
      "  - from_tensor_slices: [[1, 2, 3], [4, 5, 6]]\n"
      "  - bucket_by_sequence_length: {bucket_boundaries: [2, 4], bucket_batch_sizes: [1, 2, 1],\n"
      "                                padded_shapes: [[5]], padding_values: [-1]}\n";
  CHECK(Yaml(yaml) == Lines{"[[1, 2, 3, -1, -1], [4, 5, 6, -1, -1]]"});
  BucketOptions options;
  options.padded_shapes = {{5}};
  options.padding_values = {Tensor::Scalar<int64_t>(-1)};
  CHECK(testing::YamlFingerprint(yaml) ==
        Dataset::FromTensorSlices({*Tensor::FromVector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3})})
            .BucketBySequenceLength({2, 4}, {1, 2, 1}, options)
            .Fingerprint());
}

TEST_CASE("bucket_by_sequence_length: resumes with its buckets at every position",
          "[ops][bucket_by_sequence_length][checkpoint]") {
  std::vector<std::vector<int64_t>> rows;
  for (int64_t i = 0; i < 24; ++i) rows.push_back(std::vector<int64_t>((i * 5) % 7 + 1, i));
  testing::CheckResumesEverywhere(
      Sequences(rows).Shuffle(6, 3).BucketBySequenceLength({3, 5}, {2, 3, 2}).Repeat(2));
  BucketOptions options;
  options.pad_to_bucket_boundary = true;
  options.drop_remainder = true;
  testing::CheckResumesEverywhere(
      Sequences(rows).Shuffle(5, 8).BucketBySequenceLength({2, 4, 8}, {3, 2, 2, 1}, options).Repeat(2));
}

TEST_CASE("bucket_by_sequence_length: a malformed state is refused",
          "[ops][bucket_by_sequence_length][checkpoint]") {
  // After the first batch, bucket 0 holds [0].
  const Dataset bucketed = TfExample().BucketBySequenceLength({3, 5}, {2, 2, 2});
  CHECK(RestoreEdited(bucketed, 1, [](proto::IteratorState*) {}).ok());
  const absl::Status status = RestoreEdited(bucketed, 1, [](proto::IteratorState* state) {
    (*state->mutable_inputs(1)->mutable_ints())["key"] = 3;
  });
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() ==
        "the saved iterator state is malformed: bucket_by_sequence_length has no group 3");
}

}  // namespace
}  // namespace sluice
