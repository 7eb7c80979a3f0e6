// Helpers for the tests of the element functions (pipeline/functions/ and
// pipeline/function_test.cc): make a function from the registry, apply it
// with its output spec checked, and read the result as JSON.
#ifndef SLUICE_TESTS_TESTING_FUNCTION_TEST_UTIL_H_
#define SLUICE_TESTS_TESTING_FUNCTION_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "client/dataset_internal.h"
#include "common/json.h"
#include "pipeline/function.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice::testing {

inline proto::FunctionDef Def(const std::string& name, const FunctionArgMap& args = {}) {
  proto::FunctionDef def;
  def.set_name(name);
  for (const auto& [key, value] : args) (*def.mutable_args())[key] = internal::DatasetAccess::Proto(value);
  return def;
}

inline absl::StatusOr<std::unique_ptr<ElementFunction>> Make(const std::string& name,
                                                             const FunctionArgMap& args = {}) {
  return FunctionRegistry::Global().Create(Def(name, args));
}

// Creates the function, checks its output spec against the input's and
// applies it; the result as JSON (as `sluice run` prints it).
inline absl::StatusOr<std::string> Apply(const std::string& name, const FunctionArgMap& args,
                                         const Element& input) {
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
inline std::string ApplyOk(const std::string& name, const FunctionArgMap& args, const Element& input) {
  absl::StatusOr<std::string> result = Apply(name, args, input);
  if (!result.ok()) FAIL(name << ": " << result.status().message());
  return *result;
}

template <typename T>
Element Vec(std::vector<T> values) {
  return Element({Tensor::FromVector<T>(std::move(values))});
}

inline Element Str(std::string bytes) { return Element({Tensor::StringScalar(std::move(bytes))}); }

// JSON lines of a builder pipeline.
inline std::vector<std::string> Lines(const Dataset& dataset) {
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  REQUIRE(built.ok());
  absl::StatusOr<std::vector<std::string>> lines = testing::JsonLines(**built);
  REQUIRE(lines.ok());
  return *lines;
}

inline Element TwoComponents() { return Element({Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(5)}); }

inline Element NamedXY() {
  return Element({Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(5)}, MakeNames({"x", "y"}));
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_FUNCTION_TEST_UTIL_H_
