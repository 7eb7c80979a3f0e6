// Tests of the arithmetic element functions (arithmetic.cc).
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/function_test_util.h"

// In sluice::testing, beside the helpers of function_test_util.h.
namespace sluice::testing {
namespace {

using Catch::Matchers::EndsWith;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST_CASE("functions: add, subtract and multiply on int64 with an integer value", "[functions]") {
  const Element input = Vec<int64_t>({-3, 0, 1, 2, 3});
  CHECK(ApplyOk("add", {{"value", 10}}, input) == "[7, 10, 11, 12, 13]");
  CHECK(ApplyOk("subtract", {{"value", 1}}, input) == "[-4, -1, 0, 1, 2]");
  CHECK(ApplyOk("multiply", {{"value", -3}}, input) == "[9, 0, -3, -6, -9]");
}

TEST_CASE("functions: arithmetic on float32 with float and integer values", "[functions]") {
  const Element input = Vec<float>({1.5f, -2.0f, 0.0f});
  CHECK(ApplyOk("add", {{"value", 0.25}}, input) == "[1.75, -1.75, 0.25]");
  CHECK(ApplyOk("subtract", {{"value", 0.5}}, input) == "[1, -2.5, -0.5]");
  CHECK(ApplyOk("multiply", {{"value", 2}}, input) == "[3, -4, 0]");
  CHECK(ApplyOk("add", {{"value", 1}}, Vec<double>({0.5, -1.25})) == "[1.5, -0.25]");
}

TEST_CASE("functions: arithmetic keeps the component's dtype and shape", "[functions]") {
  Element input({*Tensor::FromVector<int32_t>({1, 2, 3, 4}, {2, 2})});
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("multiply", {{"value", 5}});
  REQUIRE(fn.ok());
  absl::StatusOr<Element> output = (*fn)->Call(input);
  REQUIRE(output.ok());
  CHECK(output->components[0].dtype() == DType::kInt32);
  CHECK(output->components[0].shape() == Shape{2, 2});
  CHECK(ElementToJson(*output) == "[[5, 10], [15, 20]]");
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(input));
  REQUIRE(spec.ok());
  CHECK(spec->DebugString() == "TensorSpec(shape=[2, 2], dtype=int32)");
}

TEST_CASE("functions: floordiv and mod on integers follow Python's floor semantics", "[functions]") {
  const Element input = Vec<int64_t>({-7, -6, -1, 0, 1, 6, 7});
  // Python: [x // 2 for x in ...], [x % 2 for x in ...], and the same by -2.
  CHECK(ApplyOk("floordiv", {{"value", 2}}, input) == "[-4, -3, -1, 0, 0, 3, 3]");
  CHECK(ApplyOk("mod", {{"value", 2}}, input) == "[1, 0, 1, 0, 1, 0, 1]");
  CHECK(ApplyOk("floordiv", {{"value", -2}}, input) == "[3, 3, 0, 0, -1, -3, -4]");
  CHECK(ApplyOk("mod", {{"value", -2}}, input) == "[-1, 0, -1, 0, -1, 0, -1]");
  CHECK(ApplyOk("floordiv", {{"value", 3}}, input) == "[-3, -2, -1, 0, 0, 2, 2]");
  CHECK(ApplyOk("mod", {{"value", 3}}, input) == "[2, 0, 2, 0, 1, 0, 1]");
  CHECK(ApplyOk("mod", {{"value", -3}}, input) == "[-1, 0, -1, 0, -2, 0, -2]");
}

TEST_CASE("functions: floordiv and mod by -1, including the most negative int64", "[functions]") {
  const Element input = Vec<int64_t>({kMin, -7, 0, 7, kMax});
  // kMin // -1 overflows; it wraps to kMin as tf's int arithmetic does.
  CHECK(ApplyOk("floordiv", {{"value", -1}}, input) ==
        "[-9223372036854775808, 7, 0, -7, -9223372036854775807]");
  CHECK(ApplyOk("mod", {{"value", -1}}, input) == "[0, 0, 0, 0, 0]");
}

TEST_CASE("functions: floordiv and mod on narrow integer dtypes", "[functions]") {
  Element input({Tensor::FromVector<int8_t>({-7, 7})});
  CHECK(ApplyOk("floordiv", {{"value", 2}}, input) == "[-4, 3]");
  CHECK(ApplyOk("mod", {{"value", 2}}, input) == "[1, 1]");
  Element unsigned_input({Tensor::FromVector<uint32_t>({7, 8})});
  CHECK(ApplyOk("floordiv", {{"value", 3}}, unsigned_input) == "[2, 2]");
  CHECK(ApplyOk("mod", {{"value", 3}}, unsigned_input) == "[1, 2]");
}

TEST_CASE("functions: floordiv and mod on floats follow Python's floor semantics", "[functions]") {
  const Element input = Vec<float>({-7.0f, 7.0f, 2.5f, -2.5f});
  // Python: -7.0 // 2.0 == -4.0, -7.0 % 2.0 == 1.0, 7.0 % -2.0 == -1.0.
  CHECK(ApplyOk("floordiv", {{"value", 2.0}}, input) == "[-4, 3, 1, -2]");
  CHECK(ApplyOk("mod", {{"value", 2.0}}, input) == "[1, 1, 0.5, 1.5]");
  CHECK(ApplyOk("floordiv", {{"value", -2.0}}, input) == "[3, -4, -2, 1]");
  CHECK(ApplyOk("mod", {{"value", -2.0}}, input) == "[-1, -1, -1.5, -0.5]");
  CHECK(ApplyOk("mod", {{"value", 2}}, Vec<double>({-7.5, 7.5})) == "[0.5, 1.5]");
  // A float zero divides as IEEE floats do.
  CHECK(ApplyOk("floordiv", {{"value", 0.0}}, Vec<float>({-1.0f, 1.0f})) == "[-Infinity, Infinity]");
}

TEST_CASE("functions: int64 arithmetic wraps on overflow", "[functions]") {
  CHECK(ApplyOk("add", {{"value", 1}}, Vec<int64_t>({kMax})) == "[-9223372036854775808]");
  CHECK(ApplyOk("subtract", {{"value", 1}}, Vec<int64_t>({kMin})) == "[9223372036854775807]");
  CHECK(ApplyOk("multiply", {{"value", 2}}, Vec<int64_t>({kMax})) == "[-2]");
  CHECK(ApplyOk("square", {}, Vec<int64_t>({int64_t{1} << 32, 3037000500})) == "[0, -9223372036709301616]");
  CHECK(ApplyOk("negate", {}, Vec<int64_t>({kMin})) == "[-9223372036854775808]");
  // Narrow types wrap at their own width.
  CHECK(ApplyOk("add", {{"value", 1}}, Element({Tensor::FromVector<int32_t>({2147483647})})) ==
        "[-2147483648]");
  CHECK(ApplyOk("add", {{"value", 1}}, Element({Tensor::FromVector<uint8_t>({255})})) == "[0]");
}

TEST_CASE("functions: floordiv and mod by integer 0 fail when the function is made", "[functions]") {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("floordiv", {{"value", 0}});
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()), Equals("floordiv: division by zero"));
  fn = Make("mod", {{"value", 0}});
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()), Equals("mod: division by zero"));

  // And so the pipeline fails at build, before any element is read.
  const absl::Status status = BuildError(Dataset::Range(5).Map("floordiv", {{"value", 0}}));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), StartsWith("step 2 (map): "));
  CHECK_THAT(std::string(status.message()), EndsWith("floordiv: division by zero"));
}

TEST_CASE("functions: a float value on an integer component is an error", "[functions]") {
  absl::StatusOr<std::string> result = Apply("add", {{"value", 1.5}}, Vec<int64_t>({1}));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("add: value 1.5 is not an integer but the component is int64"));

  const absl::Status status = BuildError(Dataset::Range(3).Map("multiply", {{"value", 0.5}}));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), StartsWith("step 2 (map): "));
  CHECK_THAT(std::string(status.message()),
             EndsWith("multiply: value 0.5 is not an integer but the component is int64"));
}

TEST_CASE("functions: arithmetic argument errors", "[functions]") {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("add");
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()), Equals("add: missing required argument 'value'"));

  fn = Make("subtract", {{"value", "three"}});
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()), Equals("subtract: argument 'value' must be a number"));

  absl::StatusOr<std::string> result = Apply("add", {{"value", 1}}, Str("abc"));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()), Equals("add: needs a numeric component, got string"));

  // square and negate take no value.
  fn = Make("square", {{"value", 2}});
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()),
             Equals("unknown argument 'value' for function 'square' (valid: component)"));
}

TEST_CASE("functions: square and negate", "[functions]") {
  CHECK(ApplyOk("square", {}, Vec<int64_t>({-3, 0, 4})) == "[9, 0, 16]");
  CHECK(ApplyOk("negate", {}, Vec<int64_t>({-3, 0, 4})) == "[3, 0, -4]");
  CHECK(ApplyOk("square", {}, Vec<float>({1.5f, -0.5f})) == "[2.25, 0.25]");
  CHECK(ApplyOk("negate", {}, Vec<double>({2.5, -0.125})) == "[-2.5, 0.125]");
  CHECK(Lines(Dataset::Range(4).Map("square")) == std::vector<std::string>{"0", "1", "4", "9"});
  CHECK(Lines(Dataset::Range(3).Map("negate")) == std::vector<std::string>{"0", "-1", "-2"});
}

TEST_CASE("functions: arithmetic on half-precision floats goes through float", "[functions]") {
  Element input({Tensor::FromVector<Float16>({Float16(1.5f), Float16(-2.0f)})});
  CHECK(ApplyOk("multiply", {{"value", 2}}, input) == "[3, -4]");
  CHECK(ApplyOk("add", {{"value", 0.25}}, input) == "[1.75, -1.75]");
}

}  // namespace
}  // namespace sluice::testing
