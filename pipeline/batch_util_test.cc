#include "pipeline/batch_util.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/json.h"

namespace sluice {
namespace {

Tensor Ints(std::vector<int64_t> values, Shape shape) {
  absl::StatusOr<Tensor> t = Tensor::FromVector<int64_t>(std::move(values), std::move(shape));
  REQUIRE(t.ok());
  return *t;
}
Tensor Ints(std::vector<int64_t> values) { return Tensor::FromVector<int64_t>(std::move(values)); }
Tensor Strings(std::vector<std::string> values) { return Tensor::FromVector<std::string>(std::move(values)); }

Element One(Tensor t) { return Element({std::move(t)}); }

std::string Json(const absl::StatusOr<Element>& element) {
  INFO(element.status().ToString());
  REQUIRE(element.ok());
  return ElementToJson(*element);
}

// ---------------------------------------------------------------- StackElements

TEST_CASE("batch_util: StackElements stacks scalars into a vector", "[ops][batch_util]") {
  absl::StatusOr<Element> batch = StackElements(
      {One(Tensor::Scalar<int64_t>(4)), One(Tensor::Scalar<int64_t>(5)), One(Tensor::Scalar<int64_t>(6))});
  REQUIRE(batch.ok());
  REQUIRE(batch->size() == 1);
  CHECK(batch->components[0] == Ints({4, 5, 6}));
  CHECK_FALSE(batch->named());
}

TEST_CASE("batch_util: StackElements stacks tensors along a new first dimension", "[ops][batch_util]") {
  absl::StatusOr<Element> batch = StackElements({One(Ints({1, 2})), One(Ints({3, 4})), One(Ints({5, 6}))});
  REQUIRE(batch.ok());
  CHECK(batch->components[0] == Ints({1, 2, 3, 4, 5, 6}, {3, 2}));

  absl::StatusOr<Element> matrices =
      StackElements({One(Ints({1, 2, 3, 4}, {2, 2})), One(Ints({5, 6, 7, 8}, {2, 2}))});
  REQUIRE(matrices.ok());
  CHECK(matrices->components[0].shape() == Shape{2, 2, 2});
  CHECK(Json(matrices) == "[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]");

  absl::StatusOr<Element> floats = StackElements(
      {One(Tensor::FromVector<float>({0.5f, 1.5f})), One(Tensor::FromVector<float>({2.5f, -1.0f}))});
  CHECK(Json(floats) == "[[0.5, 1.5], [2.5, -1]]");
}

TEST_CASE("batch_util: StackElements stacks strings and keeps names", "[ops][batch_util]") {
  const ComponentNames names = MakeNames({"id", "text"});
  absl::StatusOr<Element> batch =
      StackElements({Element({Tensor::Scalar<int64_t>(1), Tensor::StringScalar("one")}, names),
                     Element({Tensor::Scalar<int64_t>(2), Tensor::StringScalar("two")}, names)});
  REQUIRE(batch.ok());
  REQUIRE(batch->named());
  CHECK(*batch->names == std::vector<std::string>{"id", "text"});
  CHECK(batch->components[0] == Ints({1, 2}));
  CHECK(batch->components[1] == Strings({"one", "two"}));
  CHECK(Json(batch) == "{\"id\": [1, 2], \"text\": [\"one\", \"two\"]}");
}

TEST_CASE("batch_util: StackElements of a single element and of empty tensors", "[ops][batch_util]") {
  absl::StatusOr<Element> single = StackElements({One(Ints({7, 8}))});
  REQUIRE(single.ok());
  CHECK(single->components[0] == Ints({7, 8}, {1, 2}));

  absl::StatusOr<Element> empty = StackElements({One(Ints({}, {0})), One(Ints({}, {0}))});
  REQUIRE(empty.ok());
  CHECK(empty->components[0].shape() == Shape{2, 0});
  CHECK(Json(empty) == "[[], []]");
}

TEST_CASE("batch_util: StackElements errors", "[ops][batch_util]") {
  absl::StatusOr<Element> none = StackElements({});
  CHECK(none.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(none.status().message() == "batch: no elements to stack");

  absl::StatusOr<Element> shapes = StackElements({One(Ints({1, 2})), One(Ints({1, 2, 3}))});
  CHECK(shapes.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(shapes.status().message() ==
        "batch: cannot batch component 0 of shapes [2] and [3]; use padded_batch");

  absl::StatusOr<Element> second = StackElements({Element({Tensor::Scalar<int64_t>(1), Ints({1})}),
                                                  Element({Tensor::Scalar<int64_t>(2), Ints({1, 2})})});
  CHECK(second.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(second.status().message() ==
        "batch: cannot batch component 1 of shapes [1] and [2]; use padded_batch");

  absl::StatusOr<Element> dtypes =
      StackElements({One(Tensor::Scalar<int64_t>(1)), One(Tensor::Scalar<float>(1))});
  CHECK(dtypes.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(dtypes.status().message() == "batch: component 0 has dtypes int64 and float32");

  absl::StatusOr<Element> count = StackElements(
      {One(Tensor::Scalar<int64_t>(1)), Element({Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(2)})});
  CHECK(count.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(count.status().message() == "batch: elements have 1 and 2 components");
}

// ---------------------------------------------------------------- PaddedStackElements

TEST_CASE("batch_util: PaddedStackElements pads to the longest", "[ops][batch_util]") {
  const std::vector<Element> rows = {One(Ints({1})), One(Ints({1, 2, 3})), One(Ints({4, 5}))};
  absl::StatusOr<Element> batch = PaddedStackElements(rows, {}, {});
  REQUIRE(batch.ok());
  CHECK(batch->components[0] == Ints({1, 0, 0, 1, 2, 3, 4, 5, 0}, {3, 3}));

  absl::StatusOr<Element> unknown = PaddedStackElements(rows, {PartialShape::Known({kUnknownDim})}, {});
  REQUIRE(unknown.ok());
  CHECK(unknown->components[0] == batch->components[0]);
}

TEST_CASE("batch_util: PaddedStackElements pads each dimension of matrices", "[ops][batch_util]") {
  const std::vector<Element> rows = {One(Ints({1, 2}, {1, 2})), One(Ints({3, 4}, {2, 1}))};
  CHECK(Json(PaddedStackElements(rows, {}, {})) == "[[[1, 2], [0, 0]], [[3, 0], [4, 0]]]");
  CHECK(Json(PaddedStackElements(rows, {PartialShape::Known({kUnknownDim, 3})}, {})) ==
        "[[[1, 2, 0], [0, 0, 0]], [[3, 0, 0], [4, 0, 0]]]");
  CHECK(Json(PaddedStackElements(rows, {PartialShape::Known({3, kUnknownDim})},
                                 {Tensor::Scalar<int64_t>(9)})) ==
        "[[[1, 2], [9, 9], [9, 9]], [[3, 9], [4, 9], [9, 9]]]");
  const std::vector<Element> cubes = {One(Ints({1, 2, 3, 4}, {1, 2, 2})), One(Ints({5, 6}, {2, 1, 1}))};
  CHECK(Json(PaddedStackElements(cubes, {}, {})) ==
        "[[[[1, 2], [3, 4]], [[0, 0], [0, 0]]], [[[5, 0], [0, 0]], [[6, 0], [0, 0]]]]");
}

TEST_CASE("batch_util: PaddedStackElements with explicit shapes and values", "[ops][batch_util]") {
  const std::vector<Element> rows = {One(Ints({1})), One(Ints({2, 3}))};
  CHECK(Json(PaddedStackElements(rows, {PartialShape::Known({4})}, {})) == "[[1, 0, 0, 0], [2, 3, 0, 0]]");
  CHECK(Json(PaddedStackElements(rows, {PartialShape::Known({2})}, {})) == "[[1, 0], [2, 3]]");
  CHECK(Json(PaddedStackElements(rows, {}, {Tensor::Scalar<int64_t>(-1)})) == "[[1, -1], [2, 3]]");
  CHECK(Json(PaddedStackElements(rows, {PartialShape::Known({3})}, {Tensor::Scalar<int64_t>(7)})) ==
        "[[1, 7, 7], [2, 3, 7]]");
}

TEST_CASE("batch_util: PaddedStackElements of strings and tuples", "[ops][batch_util]") {
  const ComponentNames names = MakeNames({"n", "words"});
  const std::vector<Element> rows = {Element({Tensor::Scalar<int64_t>(1), Strings({"a"})}, names),
                                     Element({Tensor::Scalar<int64_t>(2), Strings({"b", "c", "d"})}, names)};
  CHECK(Json(PaddedStackElements(rows, {}, {})) ==
        "{\"n\": [1, 2], \"words\": [[\"a\", \"\", \"\"], [\"b\", \"c\", \"d\"]]}");
  CHECK(Json(PaddedStackElements(rows, {PartialShape::Known({}), PartialShape::Known({4})},
                                 {Tensor::Scalar<int64_t>(0), Tensor::StringScalar("<pad>")})) ==
        "{\"n\": [1, 2], \"words\": [[\"a\", \"<pad>\", \"<pad>\", \"<pad>\"], [\"b\", \"c\", \"d\", "
        "\"<pad>\"]]}");
}

TEST_CASE("batch_util: PaddedStackElements errors", "[ops][batch_util]") {
  absl::StatusOr<Element> none = PaddedStackElements({}, {}, {});
  CHECK(none.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(none.status().message() == "padded_batch: no elements to stack");

  const std::vector<Element> rows = {One(Ints({1})), One(Ints({1, 2, 3}))};
  absl::StatusOr<Element> small = PaddedStackElements(rows, {PartialShape::Known({2})}, {});
  CHECK(small.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(small.status().message() ==
        "padded_batch: component 0 has size 3 in dimension 0, larger than its padded shape [2]");

  absl::StatusOr<Element> rank = PaddedStackElements(rows, {PartialShape::Known({3, 3})}, {});
  CHECK(rank.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(rank.status().message() == "padded_batch: padded shape [3, 3] of component 0 does not have rank 1");

  absl::StatusOr<Element> ranks = PaddedStackElements({One(Ints({1})), One(Ints({1, 2}, {1, 2}))}, {}, {});
  CHECK(ranks.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ranks.status().message() == "padded_batch: component 0 has ranks 1 and 2");

  absl::StatusOr<Element> value = PaddedStackElements(rows, {}, {Tensor::Scalar<float>(1)});
  CHECK(value.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(value.status().message() == "padded_batch: padding value of component 0 must be a int64 scalar");

  absl::StatusOr<Element> vector_value = PaddedStackElements(rows, {}, {Ints({1})});
  CHECK(vector_value.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(vector_value.status().message() ==
        "padded_batch: padding value of component 0 must be a int64 scalar");

  absl::StatusOr<Element> dtypes =
      PaddedStackElements({One(Ints({1})), One(Tensor::FromVector<float>({1}))}, {}, {});
  CHECK(dtypes.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(dtypes.status().message() == "padded_batch: component 0 has dtypes int64 and float32");
}

// ---------------------------------------------------------------- ConcatBatches

TEST_CASE("batch_util: ConcatBatches concatenates along the first dimension", "[ops][batch_util]") {
  absl::StatusOr<Element> out =
      ConcatBatches({One(Ints({1, 2, 3, 4}, {2, 2})), One(Ints({5, 6}, {1, 2})), One(Ints({}, {0, 2}))});
  REQUIRE(out.ok());
  CHECK(out->components[0] == Ints({1, 2, 3, 4, 5, 6}, {3, 2}));

  const ComponentNames names = MakeNames({"x", "s"});
  absl::StatusOr<Element> named = ConcatBatches(
      {Element({Ints({1}), Strings({"a"})}, names), Element({Ints({2, 3}), Strings({"b", "c"})}, names)});
  CHECK(Json(named) == "{\"x\": [1, 2, 3], \"s\": [\"a\", \"b\", \"c\"]}");
}

TEST_CASE("batch_util: ConcatBatches copies several batches but not a single one", "[ops][batch_util]") {
  const Element a = One(Ints({1, 2}));
  const Element b = One(Ints({3}));
  absl::StatusOr<Element> both = ConcatBatches({a, b});
  REQUIRE(both.ok());
  CHECK_FALSE(both->components[0].SharesBufferWith(a.components[0]));
  CHECK(both->components[0] == Ints({1, 2, 3}));

  absl::StatusOr<Element> single = ConcatBatches({a});
  REQUIRE(single.ok());
  CHECK(single->components[0] == Ints({1, 2}));
}

TEST_CASE("batch_util: ConcatBatches errors", "[ops][batch_util]") {
  absl::StatusOr<Element> none = ConcatBatches({});
  CHECK(none.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(none.status().message() == "rebatch: nothing to concatenate");

  absl::StatusOr<Element> rows =
      ConcatBatches({One(Ints({1, 2, 3, 4}, {2, 2})), One(Ints({1, 2, 3}, {1, 3}))});
  CHECK(rows.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(rows.status().message() == "rebatch: component 0 has rows of shapes [2, 2] and [1, 3]");

  absl::StatusOr<Element> dtype = ConcatBatches({One(Ints({1})), One(Tensor::FromVector<float>({1}))});
  CHECK(dtype.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(dtype.status().message()), Catch::Matchers::StartsWith("rebatch: component 0 "));
}

// ---------------------------------------------------------------- SliceBatch

TEST_CASE("batch_util: SliceBatch shares the batch's buffers", "[ops][batch_util]") {
  const ComponentNames names = MakeNames({"x", "s"});
  const Element batch({Ints({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}), Strings({"a", "b", "c", "d"})}, names);
  const Element middle = SliceBatch(batch, 1, 3);
  REQUIRE(middle.size() == 2);
  CHECK(middle.names == names);
  CHECK(middle.components[0].shape() == Shape{2, 2});
  CHECK(middle.components[0] == Ints({2, 3, 4, 5}, {2, 2}));
  CHECK(middle.components[1] == Strings({"b", "c"}));
  CHECK(middle.components[0].SharesBufferWith(batch.components[0]));
  CHECK(middle.components[1].SharesBufferWith(batch.components[1]));
  CHECK(middle.components[0].data<int64_t>() == batch.components[0].data<int64_t>() + 2);

  const Element empty = SliceBatch(batch, 4, 4);
  CHECK(empty.components[0].shape() == Shape{0, 2});
  CHECK(empty.components[1].shape() == Shape{0});
  CHECK(ElementToJson(SliceBatch(batch, 0, 4)) == ElementToJson(batch));
}

// ---------------------------------------------------------------- BatchRows

TEST_CASE("batch_util: BatchRows", "[ops][batch_util]") {
  absl::StatusOr<int64_t> rows =
      BatchRows(Element({Ints({1, 2, 3}), Ints({1, 2, 3, 4, 5, 6}, {3, 2})}), "op");
  REQUIRE(rows.ok());
  CHECK(*rows == 3);

  absl::StatusOr<int64_t> zero = BatchRows(One(Ints({}, {0, 4})), "op");
  REQUIRE(zero.ok());
  CHECK(*zero == 0);

  absl::StatusOr<int64_t> none = BatchRows(Element(), "unbatch");
  CHECK(none.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(none.status().message() == "unbatch: element has no components");

  absl::StatusOr<int64_t> scalar = BatchRows(Element({Ints({1, 2}), Tensor::Scalar<int64_t>(3)}), "rebatch");
  CHECK(scalar.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(scalar.status().message() == "rebatch: component 1 is a scalar, not a batch");

  absl::StatusOr<int64_t> differ = BatchRows(Element({Ints({1, 2}), Ints({1, 2, 3})}), "unbatch");
  CHECK(differ.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(differ.status().message() == "unbatch: components have 2 and 3 rows");
}

// ---------------------------------------------------------------- specs

TEST_CASE("batch_util: BatchedSpec adds a first dimension", "[ops][batch_util]") {
  ElementSpec spec;
  spec.components.push_back({PartialShape::Known({}), DType::kInt64});
  spec.components.push_back({PartialShape::Known({3, kUnknownDim}), DType::kString});
  spec.components.push_back({PartialShape::UnknownRank(), DType::kFloat32});
  spec.names = {"a", "b", "c"};

  ElementSpec fixed = BatchedSpec(spec, 4);
  CHECK(fixed.components[0] == TensorSpec{PartialShape::Known({4}), DType::kInt64});
  CHECK(fixed.components[1] == TensorSpec{PartialShape::Known({4, 3, kUnknownDim}), DType::kString});
  CHECK(fixed.components[2] == TensorSpec{PartialShape::UnknownRank(), DType::kFloat32});
  CHECK(fixed.names == spec.names);

  ElementSpec unknown = BatchedSpec(spec, kUnknownDim);
  CHECK(unknown.components[0].shape == PartialShape::Known({kUnknownDim}));
  CHECK(unknown.components[1].shape == PartialShape::Known({kUnknownDim, 3, kUnknownDim}));
  CHECK(unknown.components[0].shape.DebugString() == "[?]");
}

TEST_CASE("batch_util: UnbatchedSpec drops the first dimension", "[ops][batch_util]") {
  ElementSpec spec;
  spec.components.push_back({PartialShape::Known({kUnknownDim}), DType::kInt64});
  spec.components.push_back({PartialShape::Known({4, 3}), DType::kString});
  spec.components.push_back({PartialShape::UnknownRank(), DType::kFloat32});

  absl::StatusOr<ElementSpec> row = UnbatchedSpec(spec, "unbatch");
  REQUIRE(row.ok());
  CHECK(row->components[0] == TensorSpec{PartialShape::Known({}), DType::kInt64});
  CHECK(row->components[1] == TensorSpec{PartialShape::Known({3}), DType::kString});
  CHECK(row->components[2] == TensorSpec{PartialShape::UnknownRank(), DType::kFloat32});
  CHECK(BatchedSpec(*row, 4).components[1].shape == PartialShape::Known({4, 3}));

  ElementSpec scalar;
  scalar.components.push_back({PartialShape::Known({2}), DType::kInt64});
  scalar.components.push_back({PartialShape::Known({}), DType::kInt64});
  absl::StatusOr<ElementSpec> error = UnbatchedSpec(scalar, "rebatch");
  CHECK(error.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(error.status().message() == "rebatch: component 1 is a scalar; it needs a batch dimension");
}

}  // namespace
}  // namespace sluice
