// Tests of the built-in element functions (pipeline/builtin_functions.cc)
// and of the function registry's argument checking (pipeline/function.cc).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "pipeline/function.h"
#include "pipeline/record_io.h"
#include "sluice/dataset.h"
#include "sluice/example.pb.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::BuildError;

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;

proto::FunctionDef Def(const std::string& name, const FunctionArgMap& args = {}) {
  proto::FunctionDef def;
  def.set_name(name);
  for (const auto& [key, value] : args) (*def.mutable_args())[key] = value.proto();
  return def;
}

absl::StatusOr<std::unique_ptr<ElementFunction>> Make(const std::string& name,
                                                      const FunctionArgMap& args = {}) {
  return FunctionRegistry::Global().Create(Def(name, args));
}

// Creates the function, checks its output spec against the input's and
// applies it; the result as JSON (as `sluice run` prints it).
absl::StatusOr<std::string> Apply(const std::string& name, const FunctionArgMap& args, const Element& input) {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make(name, args);
  if (!fn.ok()) return fn.status();
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(input));
  if (!spec.ok()) return spec.status();
  absl::StatusOr<Element> output = (*fn)->Call(input);
  if (!output.ok()) return output.status();
  // Every concrete output fits the spec announced at build time.
  REQUIRE(output->size() == spec->components.size());
  for (size_t i = 0; i < output->size(); ++i) {
    CHECK(output->components[i].dtype() == spec->components[i].dtype);
    CHECK(spec->components[i].shape.IsCompatibleWith(output->components[i].shape()));
  }
  return ElementToJson(*output);
}

// Apply for inputs that must work.
std::string ApplyOk(const std::string& name, const FunctionArgMap& args, const Element& input) {
  absl::StatusOr<std::string> result = Apply(name, args, input);
  if (!result.ok()) FAIL(name << ": " << result.status().message());
  return *result;
}

template <typename T>
Element Vec(std::vector<T> values) {
  return Element({Tensor::FromVector<T>(std::move(values))});
}

Element Str(std::string bytes) { return Element({Tensor::StringScalar(std::move(bytes))}); }

// JSON lines of a builder pipeline.
std::vector<std::string> Lines(const Dataset& dataset) {
  absl::StatusOr<DatasetPtr> built = dataset.Build();
  REQUIRE(built.ok());
  absl::StatusOr<std::vector<std::string>> lines = testing::JsonLines(**built);
  REQUIRE(lines.ok());
  return *lines;
}

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// ---------------------------------------------------------------------------
// Arithmetic.

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

// ---------------------------------------------------------------------------
// cast.

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

// ---------------------------------------------------------------------------
// Predicates.

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

Element TwoComponents() { return Element({Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(5)}); }

Element NamedXY() {
  return Element({Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(5)}, MakeNames({"x", "y"}));
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

// ---------------------------------------------------------------------------
// select.

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

// ---------------------------------------------------------------------------
// decode_raw.

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

// ---------------------------------------------------------------------------
// parse_example.

std::string Serialize(const proto::example::Example& example) {
  std::string bytes;
  REQUIRE(example.SerializeToString(&bytes));
  return bytes;
}

proto::example::Example SampleExample() {
  proto::example::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  features["label"].mutable_int64_list()->add_value(7);
  features["pair"].mutable_int64_list()->add_value(3);
  features["pair"].mutable_int64_list()->add_value(-4);
  features["scores"].mutable_float_list()->add_value(0.5f);
  features["scores"].mutable_float_list()->add_value(1.25f);
  features["scores"].mutable_float_list()->add_value(-2.0f);
  features["name"].mutable_bytes_list()->add_value("cat");
  return example;
}

FunctionArg Shape1(int64_t d) { return FunctionArg(std::vector<FunctionArg>{FunctionArg(d)}); }

FunctionArgMap FeatureArgs(FunctionArgMap features) {
  return {{"features", FunctionArg(std::move(features))}};
}

FunctionArg WithDefault(const std::string& dtype, FunctionArg shape, FunctionArg value) {
  return FunctionArg(
      FunctionArgMap{{"dtype", dtype}, {"shape", std::move(shape)}, {"default", std::move(value)}});
}

// A scalar feature (no shape) with a default.
FunctionArg ScalarWithDefault(const std::string& dtype, FunctionArg value) {
  return FunctionArg(FunctionArgMap{{"dtype", dtype}, {"default", std::move(value)}});
}

TEST_CASE("functions: parse_example reads int64, float32 and string features", "[functions]") {
  const FunctionArgMap args = FeatureArgs({
      {"label", FunctionArg(FunctionArgMap{{"dtype", "int64"}})},
      {"pair", FunctionArg(FunctionArgMap{{"dtype", "int64"}, {"shape", Shape1(2)}})},
      {"scores", FunctionArg(FunctionArgMap{{"dtype", "float32"}, {"shape", Shape1(-1)}})},
      {"name", FunctionArg(FunctionArgMap{{"dtype", "string"}})},
  });
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("parse_example", args);
  REQUIRE(fn.ok());
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(Str("")));
  REQUIRE(spec.ok());
  // Components are ordered by feature name.
  CHECK(spec->DebugString() ==
        "{label: TensorSpec(shape=[], dtype=int64), name: TensorSpec(shape=[], dtype=string), "
        "pair: TensorSpec(shape=[2], dtype=int64), scores: TensorSpec(shape=[?], dtype=float32)}");
  CHECK(ApplyOk("parse_example", args, Str(Serialize(SampleExample()))) ==
        "{\"label\": 7, \"name\": \"cat\", \"pair\": [3, -4], \"scores\": [0.5, 1.25, -2]}");

  // Variable length gives each element its own count.
  proto::example::Example shorter = SampleExample();
  (*shorter.mutable_features()->mutable_feature())["scores"].mutable_float_list()->clear_value();
  (*shorter.mutable_features()->mutable_feature())["scores"].mutable_float_list()->add_value(9.0f);
  CHECK(ApplyOk("parse_example", args, Str(Serialize(shorter))) ==
        "{\"label\": 7, \"name\": \"cat\", \"pair\": [3, -4], \"scores\": [9]}");
}

TEST_CASE("functions: parse_example with a 2-D fixed shape", "[functions]") {
  proto::example::Example example;
  auto* values = (*example.mutable_features()->mutable_feature())["m"].mutable_int64_list();
  for (int64_t v : {1, 2, 3, 4, 5, 6}) values->add_value(v);
  const FunctionArgMap args =
      FeatureArgs({{"m", FunctionArg(FunctionArgMap{
                             {"dtype", "int64"}, {"shape", FunctionArg(std::vector<FunctionArg>{2, 3})}})}});
  CHECK(ApplyOk("parse_example", args, Str(Serialize(example))) == "{\"m\": [[1, 2, 3], [4, 5, 6]]}");
}

TEST_CASE("functions: parse_example defaults for missing features", "[functions]") {
  const FunctionArgMap args = FeatureArgs({
      {"label", FunctionArg(FunctionArgMap{{"dtype", "int64"}})},
      {"weight", ScalarWithDefault("float32", 1)},
      {"mask", WithDefault("int64", Shape1(2), -1)},
      {"tag", ScalarWithDefault("string", "none")},
      {"ratio", WithDefault("float32", Shape1(1), 0.5)},
  });
  CHECK(ApplyOk("parse_example", args, Str(Serialize(SampleExample()))) ==
        "{\"label\": 7, \"mask\": [-1, -1], \"ratio\": [0.5], \"tag\": \"none\", \"weight\": 1}");

  // A present feature wins over its default.
  proto::example::Example example = SampleExample();
  (*example.mutable_features()->mutable_feature())["tag"].mutable_bytes_list()->add_value("dog");
  CHECK(ApplyOk("parse_example", args, Str(Serialize(example))) ==
        "{\"label\": 7, \"mask\": [-1, -1], \"ratio\": [0.5], \"tag\": \"dog\", \"weight\": 1}");
}

TEST_CASE("functions: parse_example errors on the data", "[functions]") {
  const FunctionArgMap args = FeatureArgs({{"missing", FunctionArg(FunctionArgMap{{"dtype", "int64"}})}});
  absl::StatusOr<std::string> result = Apply("parse_example", args, Str(Serialize(SampleExample())));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: feature 'missing' is missing and has no default"));

  result = Apply(
      "parse_example",
      FeatureArgs({{"scores", FunctionArg(FunctionArgMap{{"dtype", "float32"}, {"shape", Shape1(2)}})}}),
      Str(Serialize(SampleExample())));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: feature 'scores' has 3 values but shape [2] needs 2"));

  result = Apply("parse_example", FeatureArgs({{"pair", FunctionArg(FunctionArgMap{{"dtype", "int64"}})}}),
                 Str(Serialize(SampleExample())));
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: feature 'pair' has 2 values but shape [] needs 1"));

  result = Apply("parse_example", FeatureArgs({{"label", FunctionArg(FunctionArgMap{{"dtype", "float32"}})}}),
                 Str(Serialize(SampleExample())));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: feature 'label' is not stored as float32"));

  // Bytes that are not a serialized Example (a truncated length-delimited
  // field) are data loss.
  result = Apply("parse_example", FeatureArgs({{"label", FunctionArg(FunctionArgMap{{"dtype", "int64"}})}}),
                 Str(std::string("\x0a\x05"
                                 "ab",
                                 4)));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: the record is not a valid tf.train.Example"));
}

TEST_CASE("functions: parse_example argument errors", "[functions]") {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("parse_example");
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: argument 'features' must map feature names to {dtype, shape}"));

  fn = Make("parse_example", FeatureArgs({{"x", FunctionArg(FunctionArgMap{{"dtype", "int32"}})}}));
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: feature 'x' must be int64, float32 or string, as in tf.train.Example"));

  fn = Make("parse_example",
            FeatureArgs({{"x", FunctionArg(FunctionArgMap{{"dtype", "int64"}, {"shap", Shape1(2)}})}}));
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: feature 'x' has unknown key 'shap' (valid: dtype, shape, default)"));

  fn = Make("parse_example", FeatureArgs({{"x", WithDefault("int64", Shape1(-1), 0)}}));
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: feature 'x': a default needs a fully known shape"));

  fn = Make("parse_example", FeatureArgs({{"x", FunctionArg(FunctionArgMap{{"dtype", "flaot32"}})}}));
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: feature 'x': unknown dtype 'flaot32'; did you mean 'float32'?"));

  fn = Make("parse_example", FeatureArgs({{"x", FunctionArg(FunctionArgMap{{"dtype", "int64"}})}}));
  REQUIRE(fn.ok());
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(Vec<int64_t>({1})));
  REQUIRE_FALSE(spec.ok());
  CHECK_THAT(std::string(spec.status().message()),
             Equals("parse_example: needs elements of one scalar string (a serialized Example), got "
                    "TensorSpec(shape=[1], dtype=int64)"));
}

TEST_CASE("functions: parse_example over a TFRecord file in a YAML pipeline", "[functions]") {
  testing::TempDir dir;
  const std::string path = dir.File("examples.tfrecord");
  {
    absl::StatusOr<std::unique_ptr<TFRecordWriter>> writer = TFRecordWriter::Create(path);
    REQUIRE(writer.ok());
    for (int64_t i = 0; i < 3; ++i) {
      proto::example::Example example;
      auto& features = *example.mutable_features()->mutable_feature();
      features["id"].mutable_int64_list()->add_value(i);
      for (int64_t k = 0; k < i; ++k)
        features["tokens"].mutable_bytes_list()->add_value(absl::StrCat("t", k));
      if (i == 0) features["tokens"].mutable_bytes_list();
      REQUIRE((*writer)->Write(Serialize(example)).ok());
    }
    REQUIRE((*writer)->Close().ok());
  }
  absl::StatusOr<std::vector<std::string>> lines =
      testing::RunYaml(absl::StrCat("pipeline:\n"
                                    "  - tfrecord: ",
                                    path,
                                    "\n"
                                    "  - map: {fn: parse_example, features: {id: {dtype: int64}, tokens: "
                                    "{dtype: string, shape: [-1]}}}\n"));
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"{\"id\": 0, \"tokens\": []}", "{\"id\": 1, \"tokens\": [\"t0\"]}",
                                           "{\"id\": 2, \"tokens\": [\"t0\", \"t1\"]}"});
}

// An empty list argument is lost on the way into AttrValue: the YAML
// loader's ToAttr (pipeline/yaml_loader.cc) and FunctionArg's list
// constructor (client/dataset.cc) only call mutable_list() inside the loop
// over the items, so `[]` becomes an unset value. tf's usual scalar feature,
// shape [], then fails with "shape must be a list of sizes".
TEST_CASE("functions: parse_example accepts shape [] for a scalar feature (YAML)", "[functions]") {
  proto::example::Example example;
  (*example.mutable_features()->mutable_feature())["id"].mutable_int64_list()->add_value(5);
  testing::TempDir dir;
  const std::string path = dir.File("one.tfrecord");
  {
    absl::StatusOr<std::unique_ptr<TFRecordWriter>> writer = TFRecordWriter::Create(path);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->Write(Serialize(example)).ok());
  }
  absl::StatusOr<std::vector<std::string>> lines = testing::RunYaml(absl::StrCat(
      "pipeline:\n"
      "  - tfrecord: ",
      path,
      "\n"
      "  - map: {fn: parse_example, features: {id: {dtype: int64, shape: []}, w: {dtype: float32, shape: [], "
      "default: 1}}}\n"));
  if (!lines.ok()) FAIL(lines.status().message());
  CHECK(*lines == std::vector<std::string>{"{\"id\": 5, \"w\": 1}"});
}

TEST_CASE("functions: an empty FunctionArg list is a list", "[functions]") {
  CHECK(FunctionArg(std::vector<FunctionArg>{}).proto().value_case() == proto::AttrValue::kList);
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn =
      Make("select", {{"components", std::vector<FunctionArg>{}}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("select: 'components' is empty"));
  CHECK(ApplyOk("parse_example",
                FeatureArgs({{"label",
                              FunctionArg(FunctionArgMap{
                                  {"dtype", "int64"}, {"shape", FunctionArg(std::vector<FunctionArg>{})}})}}),
                Str(Serialize(SampleExample()))) == "{\"label\": 7}");
}

// ---------------------------------------------------------------------------
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
}  // namespace sluice
