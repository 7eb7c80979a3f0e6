#include "common/json.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace sluice {
namespace {

TEST_CASE("Scalars print as JSON numbers and booleans", "[json]") {
  CHECK(ElementToJson(Element({Tensor::Scalar<int64_t>(-42)})) == "-42");
  CHECK(ElementToJson(Element({Tensor::Scalar<uint8_t>(255)})) == "255");
  CHECK(ElementToJson(Element({Tensor::Scalar<bool>(true)})) == "true");
  CHECK(ElementToJson(Element({Tensor::Scalar<float>(0.1f)})) == "0.1");
  CHECK(ElementToJson(Element({Tensor::Scalar<double>(0.1)})) == "0.1");
  CHECK(ElementToJson(Element({Tensor::Scalar<float>(1e20f)})) == "1e+20");
  CHECK(ElementToJson(Element({Tensor::Scalar<Float16>(Float16(1.5f))})) == "1.5");
  CHECK(ElementToJson(Element({Tensor::Scalar<float>(std::nanf(""))})) == "NaN");
  CHECK(ElementToJson(Element({Tensor::Scalar<double>(-INFINITY)})) == "-Infinity");
}

TEST_CASE("Tensors print as nested arrays", "[json]") {
  Tensor matrix = *Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(ElementToJson(Element({matrix})) == "[[1, 2, 3], [4, 5, 6]]");
  CHECK(ElementToJson(Element({Tensor(DType::kInt64, {0})})) == "[]");
  CHECK(ElementToJson(Element({Tensor(DType::kInt64, {2, 0})})) == "[[], []]");
}

TEST_CASE("Several components print as an array, named ones as an object", "[json]") {
  Element tuple({Tensor::Scalar<int64_t>(1), Tensor::StringScalar("a")});
  CHECK(ElementToJson(tuple) == "[1, \"a\"]");
  Element named({Tensor::Scalar<int64_t>(1), *Tensor::FromVector<float>({0.5f, 2.0f}, {2})},
                MakeNames({"id", "x"}));
  CHECK(ElementToJson(named) == "{\"id\": 1, \"x\": [0.5, 2]}");
  Element one_named({Tensor::Scalar<int64_t>(7)}, MakeNames({"id"}));
  CHECK(ElementToJson(one_named) == "{\"id\": 7}");
}

TEST_CASE("Strings are escaped, and bytes that are not UTF-8 are base64", "[json]") {
  CHECK(ElementToJson(Element({Tensor::StringScalar("say \"hi\"\n\\")})) == "\"say \\\"hi\\\"\\n\\\\\"");
  CHECK(ElementToJson(Element({Tensor::StringScalar(std::string("\x01", 1))})) == "\"\\u0001\"");
  CHECK(ElementToJson(Element({Tensor::StringScalar("caf\xc3\xa9")})) == "\"caf\xc3\xa9\"");
  CHECK(ElementToJson(Element({Tensor::StringScalar("\xff\xfe\x00")})) == "\"b64://4=\"");
  CHECK(ElementToJson(Element({Tensor::StringScalar(std::string("\xff\xfe\x00", 3))})) == "\"b64://4A\"");
}

}  // namespace
}  // namespace sluice
