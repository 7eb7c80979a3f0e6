// Tests of the comparison predicates (comparison.cc).
#include <catch2/catch.hpp>
#include <cstdint>
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

TEST_CASE("functions: the six predicates in filter", "[functions]") {
  const Dataset range = Dataset::Range(10);
  CHECK(Lines(range.Filter("less", {{"value", 3}})) == std::vector<std::string>{"0", "1", "2"});
  CHECK(Lines(range.Filter("less_equal", {{"value", 3}})) == std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(Lines(range.Filter("greater", {{"value", 7}})) == std::vector<std::string>{"8", "9"});
  CHECK(Lines(range.Filter("greater_equal", {{"value", 7}})) == std::vector<std::string>{"7", "8", "9"});
  CHECK(Lines(range.Filter("equal", {{"value", 5}})) == std::vector<std::string>{"5"});
  CHECK(Lines(range.Filter("not_equal", {{"value", 5}})) ==
        std::vector<std::string>{"0", "1", "2", "3", "4", "6", "7", "8", "9"});
}

TEST_CASE("functions: predicates give a bool tensor of the component's shape", "[functions]") {
  const Element input = Vec<int64_t>({1, 2, 3});
  CHECK(ApplyOk("less", {{"value", 2}}, input) == "[true, false, false]");
  CHECK(ApplyOk("less_equal", {{"value", 2}}, input) == "[true, true, false]");
  CHECK(ApplyOk("greater", {{"value", 2}}, input) == "[false, false, true]");
  CHECK(ApplyOk("greater_equal", {{"value", 2}}, input) == "[false, true, true]");
  CHECK(ApplyOk("equal", {{"value", 2}}, input) == "[false, true, false]");
  CHECK(ApplyOk("not_equal", {{"value", 2}}, input) == "[true, false, true]");
}

TEST_CASE("functions: predicates compare floats, mixed numbers and strings", "[functions]") {
  // A float value against an integer component compares as numbers.
  CHECK(Lines(Dataset::Range(5).Filter("less", {{"value", 2.5}})) == std::vector<std::string>{"0", "1", "2"});
  CHECK(ApplyOk("greater", {{"value", 0}}, Vec<float>({-0.5f, 0.0f, 0.5f})) == "[false, false, true]");
  Element strings({Tensor::FromVector<std::string>({"apple", "banana", "cherry"})});
  CHECK(ApplyOk("equal", {{"value", "banana"}}, strings) == "[false, true, false]");
  CHECK(ApplyOk("less", {{"value", "banana"}}, strings) == "[true, false, false]");
  // uint64 values past INT64_MAX stay in order.
  Element big({Tensor::FromVector<uint64_t>({1, uint64_t{1} << 63})});
  CHECK(ApplyOk("greater", {{"value", 5}}, big) == "[false, true]");
  CHECK(ApplyOk("greater", {{"value", -1}}, big) == "[true, true]");
}

TEST_CASE("functions: predicate type mismatches are errors", "[functions]") {
  absl::StatusOr<std::string> result = Apply("equal", {{"value", "3"}}, Vec<int64_t>({3}));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("equal: cannot compare a int64 component with a string"));

  result = Apply("less", {{"value", 3}}, Str("abc"));
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()),
             Equals("less: cannot compare a string component with a number"));

  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("greater");
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("greater: missing required argument 'value'"));
}

TEST_CASE("functions: a predicate on a multi-component element needs `component`", "[functions]") {
  absl::StatusOr<std::string> result = Apply("less", {{"value", 3}}, TwoComponents());
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(
      std::string(result.status().message()),
      Equals("less: the element has 2 components; pick the one to compare with the 'component' argument"));

  const Dataset pairs = Dataset::FromTensorSlices(
      {Tensor::FromVector<int64_t>({1, 2, 3, 4}), Tensor::FromVector<int64_t>({40, 30, 20, 10})});
  const absl::Status status = BuildError(pairs.Filter("less", {{"value", 3}}));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), StartsWith("step 2 (filter): "));
  CHECK_THAT(
      std::string(status.message()),
      EndsWith("less: the element has 2 components; pick the one to compare with the 'component' argument"));

  // With `component`, by index.
  CHECK(Lines(pairs.Filter("less", {{"value", 3}, {"component", 0}})) ==
        std::vector<std::string>{"[1, 40]", "[2, 30]"});
  CHECK(Lines(pairs.Filter("less", {{"value", 25}, {"component", 1}})) ==
        std::vector<std::string>{"[3, 20]", "[4, 10]"});
}

}  // namespace
}  // namespace sluice::testing
