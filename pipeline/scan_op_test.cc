// Tests of scan (scan_op.cc) and its running-sum function `accumulate`
// (functions/accumulate.cc): tf.data's documented example, states of
// several shapes, the contract's errors, and YAML.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::BuildError;
using testing::IntsOf;
using testing::JsonOf;
using testing::MustBuild;
using testing::Yaml;
using Lines = std::vector<std::string>;

const std::vector<Tensor> kZero = {Tensor::Scalar<int64_t>(0)};

TEST_CASE("scan: tf.data's example, a running sum of range(10)", "[ops][scan]") {
  // tf.data: range(10).scan(0, lambda state, i: (state + i, state + i)).
  const std::vector<int64_t> expected = {0, 1, 3, 6, 10, 15, 21, 28, 36, 45};
  CHECK(IntsOf(Dataset::Range(10).Scan("accumulate", kZero)) == expected);
  CHECK(Yaml("pipeline:\n  - range: 10\n  - scan: {fn: accumulate, initial_state: 0}\n") ==
        Lines{"0", "1", "3", "6", "10", "15", "21", "28", "36", "45"});
  CHECK(
      testing::YamlFingerprint("pipeline:\n  - range: 10\n  - scan: {fn: accumulate, initial_state: 0}\n") ==
      Dataset::Range(10).Scan("accumulate", kZero).Fingerprint());
  CHECK(MustBuild(Dataset::Range(10).Scan("accumulate", kZero))->Cardinality() == 10);
}

TEST_CASE("scan: floats, vectors, and a state that starts elsewhere", "[ops][scan]") {
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [0.5, 1.5, 2.0]\n  - scan: {fn: accumulate, initial_state: "
             "1.0}\n") == Lines{"1.5", "3", "5"});
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [[1, 2], [3, 4]]\n"
             "  - scan: {fn: accumulate, initial_state: [[10, 20]]}\n") == Lines{"[11, 22]", "[14, 26]"});
  // Each iterator (each epoch) starts from the initial state.
  CHECK(IntsOf(Dataset::Range(3).Scan("accumulate", kZero).Repeat(2)) ==
        std::vector<int64_t>{0, 1, 3, 0, 1, 3});
}

TEST_CASE("scan: errors name the step and the contract", "[ops][scan]") {
  CHECK(BuildError(Dataset::Range(3).Scan("accumulate", {})).message() ==
        "step 2 (scan): missing 'initial_state', the state's first value");
  CHECK(
      BuildError(Dataset::Range(3).Scan("accumulate", {Tensor::Scalar<float>(0.5f)})).message() ==
      "step 2 (scan): accumulate: takes (state, element) of one int32, int64, float32 or float64 dtype; got "
      "(TensorSpec(shape=[], dtype=float32), TensorSpec(shape=[], dtype=int64))");
  // select keeps only the element: no state comes back.
  CHECK(BuildError(Dataset::Range(3).Scan("select", kZero, {{"components", 1}})).message() ==
        "step 2 (scan): 'select' returns TensorSpec(shape=[], dtype=int64), which must start with the state, "
        "TensorSpec(shape=[], dtype=int64), and then an element");
  CHECK_THAT(std::string(BuildError(Dataset::Range(3).Scan("acumulate", kZero)).message()),
             Catch::Contains("did you mean 'accumulate'"));
  absl::StatusOr<Lines> missing = testing::RunYaml("pipeline:\n  - range: 3\n  - scan: {initial_state: 0}\n");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "test.yaml:3:11: scan: missing 'fn', the element function to apply");
  // A state whose shape changes is the element's error.
  absl::StatusOr<Lines> reshaped = testing::RunYaml(
      "pipeline:\n  - from_tensor_slices: [[1, 2]]\n  - scan: {fn: accumulate, initial_state: 0}\n");
  REQUIRE_FALSE(reshaped.ok());
  CHECK_THAT(std::string(reshaped.status().message()),
             Catch::Contains("accumulate: the state's shape [] differs from the element's [2]"));
}

}  // namespace
}  // namespace sluice
