// Tests of the `select` element function (select.cc).
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/function_test_util.h"

// In sluice::testing, beside the helpers of function_test_util.h.
namespace sluice::testing {
namespace {

using Catch::Matchers::Equals;

TEST_CASE("functions: select by index and by name", "[functions]") {
  CHECK(ApplyOk("select", {{"components", std::vector<FunctionArg>{1, 0}}}, TwoComponents()) == "[5, 1]");
  CHECK(ApplyOk("select", {{"components", 1}}, TwoComponents()) == "5");
  CHECK(ApplyOk("select", {{"components", std::vector<FunctionArg>{"y"}}}, NamedXY()) == "{\"y\": 5}");
  CHECK(ApplyOk("select", {{"components", std::vector<FunctionArg>{"y", 0}}}, NamedXY()) ==
        "{\"y\": 5, \"x\": 1}");

  absl::StatusOr<std::unique_ptr<ElementFunction>> fn =
      Make("select", {{"components", std::vector<FunctionArg>{"y"}}});
  REQUIRE(fn.ok());
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(NamedXY()));
  REQUIRE(spec.ok());
  CHECK(spec->DebugString() == "{y: TensorSpec(shape=[], dtype=int64)}");
}

TEST_CASE("functions: select errors", "[functions]") {
  absl::StatusOr<std::string> result =
      Apply("select", {{"components", std::vector<FunctionArg>{0, 5}}}, TwoComponents());
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("select: component 5 is out of range for an element of 2 components"));

  result = Apply("select", {{"components", std::vector<FunctionArg>{"z"}}}, NamedXY());
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()), Equals("select: no component named 'z'"));

  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("select");
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("select: missing required argument 'components'"));
  proto::FunctionDef empty = Def("select");
  (*empty.mutable_args())["components"].mutable_list();  // []
  fn = FunctionRegistry::Global().Create(empty);
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("select: 'components' is empty"));
  fn = Make("select", {{"components", std::vector<FunctionArg>{1.5}}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("select: each of 'components' must be an index or a name"));
}

}  // namespace
}  // namespace sluice::testing
