#include "common/proto_convert.h"

#include <catch2/catch.hpp>

namespace sluice {
namespace {

TEST_CASE("Every dtype round-trips through its proto form", "[proto]") {
  std::vector<Tensor> tensors = {
      *Tensor::FromVector<bool>({true, false}, {2}),
      *Tensor::FromVector<int8_t>({-1, 2}, {2}),
      *Tensor::FromVector<int16_t>({-300, 300}, {2}),
      *Tensor::FromVector<int32_t>({-70000, 1}, {2}),
      *Tensor::FromVector<int64_t>({INT64_MIN, INT64_MAX}, {2}),
      *Tensor::FromVector<uint8_t>({0, 255}, {2}),
      *Tensor::FromVector<uint16_t>({65535, 1}, {2}),
      *Tensor::FromVector<uint32_t>({4000000000u, 1}, {2}),
      *Tensor::FromVector<uint64_t>({UINT64_MAX, 1}, {2}),
      *Tensor::FromVector<Float16>({Float16(1.5f), Float16(-2.0f)}, {2}),
      *Tensor::FromVector<BFloat16>({BFloat16(3.0f), BFloat16(0.5f)}, {2}),
      *Tensor::FromVector<float>({1.25f, -0.0f, 3.5f, 4.0f}, {2, 2}),
      *Tensor::FromVector<double>({1e300}, {1, 1}),
      *Tensor::FromVector<std::string>({"", std::string("\0x", 2), "long string"}, {3}),
      Tensor::Scalar<int64_t>(5),
      Tensor(DType::kFloat32, {0, 3}),
  };
  for (const Tensor& t : tensors) {
    proto::TensorProto p;
    TensorToProto(t, &p);
    absl::StatusOr<Tensor> back = TensorFromProto(p);
    REQUIRE(back.ok());
    CHECK(*back == t);
  }
}

TEST_CASE("Elements and specs round-trip with their names", "[proto]") {
  Element element({Tensor::Scalar<int64_t>(3), Tensor::StringScalar("x")}, MakeNames({"id", "text"}));
  proto::ElementProto p;
  ElementToProto(element, &p);
  absl::StatusOr<Element> back = ElementFromProto(p);
  REQUIRE(back.ok());
  CHECK(*back == element);
  CHECK(*back->names == std::vector<std::string>{"id", "text"});

  ElementSpec spec;
  spec.components = {{PartialShape{{kUnknownDim, 4}}, DType::kFloat32},
                     {PartialShape::UnknownRank(), DType::kString}};
  spec.names = {"a", "b"};
  proto::ElementSpecProto sp;
  ElementSpecToProto(spec, &sp);
  absl::StatusOr<ElementSpec> spec_back = ElementSpecFromProto(sp);
  REQUIRE(spec_back.ok());
  CHECK(*spec_back == spec);
}

TEST_CASE("Malformed tensor protos are errors, not crashes", "[proto]") {
  proto::TensorProto p;
  p.set_dtype(proto::DT_INT32);
  p.mutable_shape()->add_dims(3);
  p.set_content(std::string(8, '\0'));
  CHECK(TensorFromProto(p).status().message() == "int32 tensor of shape [3] needs 12 bytes, got 8");
  p.set_dtype(proto::DT_STRING);
  p.add_string_values("only one");
  CHECK(TensorFromProto(p).status().message() == "string tensor of shape [3] has 1 values");
  p.set_dtype(static_cast<proto::DataType>(99));
  CHECK(TensorFromProto(p).status().message() == "invalid dtype 99");
  p.set_dtype(proto::DT_INT32);
  p.mutable_shape()->set_dims(0, -2);
  CHECK(TensorFromProto(p).status().message() == "tensor proto has a negative dimension");
  // A zero dimension after dimensions whose product overflows: no tensor
  // can have that shape (its count is -1), so it is refused, not built.
  p.mutable_shape()->set_dims(0, int64_t{1} << 40);
  p.mutable_shape()->add_dims(int64_t{1} << 40);
  p.mutable_shape()->add_dims(0);
  p.clear_content();
  CHECK(TensorFromProto(p).status() ==
        absl::InvalidArgumentError("int32 tensor of shape [1099511627776, 1099511627776, 0]: the dimensions "
                                   "before its 0 are too large to "
                                   "count"));
  p.set_dtype(proto::DT_STRING);
  p.clear_string_values();
  CHECK(TensorFromProto(p).status().code() == absl::StatusCode::kInvalidArgument);
  proto::ElementProto e;
  e.add_components()->set_dtype(proto::DT_INT64);
  e.mutable_components(0)->set_content(std::string(8, '\0'));
  e.add_names("a");
  e.add_names("b");
  CHECK(ElementFromProto(e).status().message() == "element proto has 1 components but 2 names");
}

}  // namespace
}  // namespace sluice
