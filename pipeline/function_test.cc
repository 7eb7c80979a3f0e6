// Tests of the function registry and its argument checking (function.cc),
// through the built-in element functions.
#include "pipeline/function.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/function_test_util.h"

// In sluice::testing, beside the helpers of function_test_util.h.
namespace sluice::testing {
namespace {

using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;

// The `component` argument (ComponentSelector).

TEST_CASE("functions: `component` by index and by name", "[functions]") {
  CHECK(ApplyOk("less", {{"value", 3}, {"component", 1}}, TwoComponents()) == "false");
  CHECK(ApplyOk("less", {{"value", 3}, {"component", "x"}}, NamedXY()) == "true");
  CHECK(ApplyOk("greater", {{"value", 3}, {"component", "y"}}, NamedXY()) == "true");
  // Componentwise functions touch only the chosen component.
  CHECK(ApplyOk("add", {{"value", 100}, {"component", "y"}}, NamedXY()) == "{\"x\": 1, \"y\": 105}");
  CHECK(ApplyOk("negate", {{"component", 0}}, TwoComponents()) == "[-1, 5]");
  // Without `component`, all of them.
  CHECK(ApplyOk("multiply", {{"value", 3}}, NamedXY()) == "{\"x\": 3, \"y\": 15}");

  const Dataset named = Dataset::FromTensorSlices(
      {Tensor::FromVector<int64_t>({1, 2, 3}), Tensor::FromVector<int64_t>({30, 20, 10})}, {"x", "y"});
  CHECK(Lines(named.Filter("greater_equal", {{"value", 20}, {"component", "y"}})) ==
        std::vector<std::string>{"{\"x\": 1, \"y\": 30}", "{\"x\": 2, \"y\": 20}"});
}

TEST_CASE("functions: `component` errors", "[functions]") {
  absl::StatusOr<std::string> result = Apply("less", {{"value", 3}, {"component", 2}}, TwoComponents());
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("less: component 2 is out of range for an element of 2 components"));

  result = Apply("add", {{"value", 1}, {"component", -1}}, TwoComponents());
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()),
             Equals("add: component -1 is out of range for an element of 2 components"));

  result = Apply("less", {{"value", 3}, {"component", "yy"}}, NamedXY());
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("less: no component named 'yy'; did you mean 'y'?"));

  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("negate", {{"component", 1.5}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("negate: argument 'component' must be an index or a name"));
}

// The registry.

TEST_CASE("functions: an unknown argument names the closest valid one", "[functions]") {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("add", {{"valeu", 1}});
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()),
             StartsWith("unknown argument 'valeu' for function 'add'; did you mean 'value'?"));
  CHECK_THAT(
      std::string(fn.status().message()),
      Equals("unknown argument 'valeu' for function 'add'; did you mean 'value'? (valid: component, value)"));

  // Also next to a valid `value`.
  fn = Make("less", {{"value", 1}, {"compnent", 0}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("unknown argument 'compnent' for function 'less'; did you mean 'component'? "
                    "(valid: component, value)"));

  fn = Make("cast", {{"dtype", "int64"}, {"zzzzzz", 1}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("unknown argument 'zzzzzz' for function 'cast' (valid: component, dtype)"));
}

TEST_CASE("functions: a wrong value is reported as itself, not the later arguments as unknown",
          "[functions]") {
  // normalize stops at a bad `mean` before it looks at `std`.
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("normalize", {{"mean", "x"}, {"std", 0.5}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), StartsWith("normalize: argument 'mean' must be "));
  // A missing required argument next to a misspelt one: the misspelling.
  fn = Make("add", {{"valeu", 1}});
  CHECK_THAT(std::string(fn.status().message()), StartsWith("unknown argument 'valeu'"));
}

TEST_CASE("functions: an unknown function names the closest one", "[functions]") {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("sqare");
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()), Equals("unknown function 'sqare'; did you mean 'square'?"));

  fn = Make("");
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("missing function name 'fn'"));

  fn = Make("completely_unrelated_name");
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("unknown function 'completely_unrelated_name'"));
}

TEST_CASE("functions: the registry lists the built-ins and refuses duplicates", "[functions]") {
  const FunctionRegistry& global = FunctionRegistry::Global();
  for (const char* name :
       {"add", "subtract", "multiply", "floordiv", "mod", "square", "negate", "less", "less_equal", "greater",
        "greater_equal", "equal", "not_equal", "cast", "select", "decode_raw", "parse_example"}) {
    INFO(name);
    CHECK(global.Contains(name));
  }
  CHECK_FALSE(global.Contains("sqrt"));
  CHECK(global.Description("floordiv") == "floor(x / value)");
  CHECK(global.Description("mod") == "x mod value, with the sign of value");
  CHECK(global.Description("nonexistent").empty());

  FunctionRegistry local;
  auto factory = [](FunctionArgs&) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
    return absl::UnimplementedError("not used");
  };
  REQUIRE(local.Register("twice", "first", factory).ok());
  const absl::Status status = local.Register("twice", "second", factory);
  CHECK(status.code() == absl::StatusCode::kAlreadyExists);
  CHECK_THAT(std::string(status.message()), Equals("element function 'twice' is already registered"));
  CHECK(local.Names() == std::vector<std::string>{"twice"});
  CHECK(local.Description("twice") == "first");
}

}  // namespace
}  // namespace sluice::testing
