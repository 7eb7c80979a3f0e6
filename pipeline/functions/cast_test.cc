// Tests of the `cast` element function (cast.cc).
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "tests/testing/function_test_util.h"

// In sluice::testing, beside the helpers of function_test_util.h.
namespace sluice::testing {
namespace {

using Catch::Matchers::Equals;

TEST_CASE("functions: cast float32 to int64 truncates toward zero", "[functions]") {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("cast", {{"dtype", "int64"}});
  REQUIRE(fn.ok());
  Element input = Vec<float>({-2.7f, -0.5f, 0.5f, 2.7f, 3.0f});
  absl::StatusOr<Element> output = (*fn)->Call(input);
  REQUIRE(output.ok());
  CHECK(output->components[0].dtype() == DType::kInt64);
  CHECK(ElementToJson(*output) == "[-2, 0, 0, 2, 3]");
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(input));
  REQUIRE(spec.ok());
  CHECK(spec->DebugString() == "TensorSpec(shape=[5], dtype=int64)");
}

TEST_CASE("functions: cast int64 to float16, bfloat16, float32, bool and uint8", "[functions]") {
  const Element input = Vec<int64_t>({0, 1, 3, 2049, 70000});
  // float16 holds integers exactly to 2048; 2049 rounds to even (2048) and
  // 70000 is past the largest half (65504).
  CHECK(ApplyOk("cast", {{"dtype", "float16"}}, input) == "[0, 1, 3, 2048, Infinity]");
  CHECK(ApplyOk("cast", {{"dtype", "half"}}, input) == "[0, 1, 3, 2048, Infinity]");
  // bfloat16 has 8 significant bits: 257 rounds to even (256).
  CHECK(ApplyOk("cast", {{"dtype", "bfloat16"}}, Vec<int64_t>({1, 3, 257, -258})) == "[1, 3, 256, -258]");
  CHECK(ApplyOk("cast", {{"dtype", "float32"}}, input) == "[0, 1, 3, 2049, 70000]");
  CHECK(ApplyOk("cast", {{"dtype", "bool"}}, Vec<int64_t>({0, 3, -1})) == "[false, true, true]");
  CHECK(ApplyOk("cast", {{"dtype", "uint8"}}, Vec<int64_t>({1, 255, 256, 300})) == "[1, 255, 0, 44]");
  CHECK(ApplyOk("cast", {{"dtype", "float64"}}, Vec<float>({0.5f})) == "[0.5]");
}

TEST_CASE("functions: cast errors", "[functions]") {
  absl::StatusOr<std::string> result = Apply("cast", {{"dtype", "int64"}}, Str("7"));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()), Equals("cast: cannot cast string to int64"));

  result = Apply("cast", {{"dtype", "string"}}, Vec<int64_t>({7}));
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()), Equals("cast: cannot cast int64 to string"));

  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("cast", {{"dtype", "flaot32"}});
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()),
             Equals("cast: argument 'dtype': unknown dtype 'flaot32'; did you mean 'float32'?"));

  fn = Make("cast");
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("cast: missing required argument 'dtype'"));

  fn = Make("cast", {{"dtype", 32}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("cast: argument 'dtype' must be a string"));
}

}  // namespace
}  // namespace sluice::testing
