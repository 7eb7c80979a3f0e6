// Tests of the `decode_raw` element function (decode_raw.cc).
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "tests/testing/function_test_util.h"

// In sluice::testing, beside the helpers of function_test_util.h.
namespace sluice::testing {
namespace {

using Catch::Matchers::Equals;

TEST_CASE("functions: decode_raw little and big endian", "[functions]") {
  const std::string bytes("\x01\x02\x00\x00\x00\x00\x01\x02", 8);
  CHECK(ApplyOk("decode_raw", {{"dtype", "int32"}}, Str(bytes)) == "[513, 33619968]");
  CHECK(ApplyOk("decode_raw", {{"dtype", "int32"}, {"little_endian", true}}, Str(bytes)) ==
        "[513, 33619968]");
  CHECK(ApplyOk("decode_raw", {{"dtype", "int32"}, {"little_endian", false}}, Str(bytes)) ==
        "[16908288, 258]");
  CHECK(ApplyOk("decode_raw", {{"dtype", "uint8"}}, Str(bytes)) == "[1, 2, 0, 0, 0, 0, 1, 2]");
  CHECK(ApplyOk("decode_raw", {{"dtype", "uint8"}, {"little_endian", false}}, Str(bytes)) ==
        "[1, 2, 0, 0, 0, 0, 1, 2]");
  CHECK(ApplyOk("decode_raw", {{"dtype", "int16"}, {"little_endian", false}},
                Str(std::string("\xff\xfe", 2))) == "[-2]");

  float value = 1.5f;
  std::string little(reinterpret_cast<const char*>(&value), 4);
  std::string big(little.rbegin(), little.rend());
  CHECK(ApplyOk("decode_raw", {{"dtype", "float32"}}, Str(little)) == "[1.5]");
  CHECK(ApplyOk("decode_raw", {{"dtype", "float32"}, {"little_endian", false}}, Str(big)) == "[1.5]");
}

TEST_CASE("functions: decode_raw of a string vector adds a dimension", "[functions]") {
  Element input({Tensor::FromVector<std::string>({std::string("\x01\x00", 2), std::string("\x02\x01", 2)})});
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("decode_raw", {{"dtype", "uint16"}});
  REQUIRE(fn.ok());
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(input));
  REQUIRE(spec.ok());
  CHECK(spec->DebugString() == "TensorSpec(shape=[2, ?], dtype=uint16)");
  absl::StatusOr<Element> output = (*fn)->Call(input);
  REQUIRE(output.ok());
  CHECK(output->components[0].shape() == Shape{2, 1});
  CHECK(ElementToJson(*output) == "[[1], [258]]");
}

TEST_CASE("functions: decode_raw errors", "[functions]") {
  absl::StatusOr<std::string> result = Apply("decode_raw", {{"dtype", "int32"}}, Str("abc"));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("decode_raw: 3 bytes is not a multiple of the 4-byte int32"));

  Element uneven({Tensor::FromVector<std::string>({"abcd", "abcdefgh"})});
  result = Apply("decode_raw", {{"dtype", "int32"}}, uneven);
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()),
             Equals("decode_raw: strings of one tensor must have equal lengths, got 4 and 8"));

  result = Apply("decode_raw", {{"dtype", "int32"}}, Vec<int64_t>({1}));
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()),
             Equals("decode_raw: needs a string component, got int64"));

  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("decode_raw", {{"dtype", "string"}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("decode_raw: dtype must be numeric, not string"));
  fn = Make("decode_raw", {{"dtype", "int32"}, {"little_endian", "yes"}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("decode_raw: argument 'little_endian' must be true or false"));
}

}  // namespace
}  // namespace sluice::testing
