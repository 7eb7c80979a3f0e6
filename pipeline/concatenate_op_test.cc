// Tests of concatenate (concatenate_op.cc): tf.data's documented example,
// the spec rule, cardinality, and the build from YAML.
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
using Ints = std::vector<int64_t>;

TEST_CASE("concatenate: tf.data's example, range(1, 4) then range(4, 8)", "[ops][concatenate]") {
  CHECK(IntsOf(Dataset::Range(1, 4).Concatenate(Dataset::Range(4, 8))) == Ints{1, 2, 3, 4, 5, 6, 7});
  CHECK(Yaml("pipeline:\n"
             "  - range: {start: 1, stop: 4}\n"
             "  - concatenate: {pipeline: [{range: {start: 4, stop: 8}}]}\n") ==
        std::vector<std::string>{"1", "2", "3", "4", "5", "6", "7"});
  // The shorthand: the sub-pipeline alone, with transforms of its own.
  CHECK(Yaml("pipeline:\n"
             "  - range: 2\n"
             "  - concatenate: [{range: 10}, {skip: 7}]\n"
             "  - map: {fn: multiply, value: 10}\n") ==
        std::vector<std::string>{"0", "10", "70", "80", "90"});
}

TEST_CASE("concatenate: YAML gives the SDK's definition", "[ops][concatenate][yaml]") {
  CHECK(testing::YamlFingerprint("pipeline:\n  - range: {start: 1, stop: 4}\n"
                                 "  - concatenate: {pipeline: [{range: {start: 4, stop: 8}}]}\n") ==
        Dataset::Range(1, 4).Concatenate(Dataset::Range(4, 8)).Fingerprint());
  CHECK(testing::YamlFingerprint("pipeline:\n  - range: 1\n  - concatenate: [{range: 2}, {take: 1}]\n") ==
        Dataset::Range(1).Concatenate(Dataset::Range(2).Take(1)).Fingerprint());
}

TEST_CASE("concatenate: empty inputs on either side", "[ops][concatenate]") {
  CHECK(IntsOf(Dataset::Range(0).Concatenate(Dataset::Range(3))) == Ints{0, 1, 2});
  CHECK(IntsOf(Dataset::Range(3).Concatenate(Dataset::Range(0))) == Ints{0, 1, 2});
  // Under repeat, each epoch reads both again.
  CHECK(IntsOf(Dataset::Range(2).Concatenate(Dataset::Range(5, 6)).Repeat(2)) == Ints{0, 1, 5, 0, 1, 5});
}

TEST_CASE("concatenate: shapes that differ become unknown, and names are kept", "[ops][concatenate]") {
  const Dataset pairs = Dataset::Range(4).Batch(2);   // [2]
  const Dataset triple = Dataset::Range(3).Batch(3);  // [3]
  const DatasetPtr built = MustBuild(pairs.Concatenate(triple));
  CHECK(built->element_spec().DebugString() == "TensorSpec(shape=[?], dtype=int64)");
  CHECK(JsonOf(pairs.Concatenate(triple)) == std::vector<std::string>{"[0, 1]", "[2, 3]", "[0, 1, 2]"});
  const Dataset named = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({1, 2})}, {"x"});
  CHECK(JsonOf(named.Concatenate(Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({3})}, {"x"}))) ==
        std::vector<std::string>{"{\"x\": 1}", "{\"x\": 2}", "{\"x\": 3}"});
}

TEST_CASE("concatenate: incompatible specs name both", "[ops][concatenate]") {
  const absl::Status dtype =
      BuildError(Dataset::Range(3).Concatenate(Dataset::FromTensors({Tensor::StringScalar("a")})));
  CHECK(dtype.code() == absl::StatusCode::kInvalidArgument);
  CHECK(dtype.message() ==
        "step 2 (concatenate): incompatible element specs TensorSpec(shape=[], dtype=int64) and "
        "TensorSpec(shape=[], dtype=string) (components must match in number, names and dtype)");
  const Dataset x = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({1})}, {"x"});
  const Dataset y = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({1})}, {"y"});
  CHECK(BuildError(x.Concatenate(y)).message() ==
        "step 2 (concatenate): incompatible element specs {x: TensorSpec(shape=[], dtype=int64)} and "
        "{y: TensorSpec(shape=[], dtype=int64)} (components must match in number, names and dtype)");
  const absl::Status count =
      BuildError(Dataset::Range(3).Concatenate(Dataset::Zip({Dataset::Range(1), Dataset::Range(1)})));
  CHECK(count.message() ==
        "step 2 (concatenate): incompatible element specs TensorSpec(shape=[], dtype=int64) and "
        "(TensorSpec(shape=[], dtype=int64), TensorSpec(shape=[], dtype=int64)) (components must match in "
        "number, names and dtype)");
  // The sub-pipeline's own errors name where they are.
  CHECK(BuildError(Dataset::Range(3).Concatenate(Dataset::Range(0, 3, 0))).message() ==
        "step 2 (concatenate): 'pipeline': step 1 (range): step must not be 0");
  absl::StatusOr<std::vector<std::string>> empty =
      testing::RunYaml("pipeline:\n  - range: 3\n  - concatenate: {pipeline: []}\n");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message() == "test.yaml:3:29: the pipeline has no steps");
}

TEST_CASE("concatenate: cardinality is tf.data's", "[ops][concatenate][cardinality]") {
  CHECK(MustBuild(Dataset::Range(3).Concatenate(Dataset::Range(4)))->Cardinality() == 7);
  CHECK(MustBuild(Dataset::Range(3).Concatenate(Dataset::Range(4).Repeat()))->Cardinality() ==
        kInfiniteCardinality);
  CHECK(MustBuild(Dataset::Range(3).Concatenate(Dataset::Range(4).Filter("less", {{"value", 2}})))
            ->Cardinality() == kUnknownCardinality);
}

}  // namespace
}  // namespace sluice
