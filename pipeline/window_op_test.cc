// Tests of window (window_op.cc) with tf.data's documented examples, and of
// flat_map over windows (a sub-pipeline whose from_tensor_slices has no
// tensors reads the window): tf.data's window(...).flat_map(lambda w: ...).
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

// The window being mapped, row by row.
Dataset Rows() { return Dataset::FromTensorSlices({}); }

TEST_CASE("window: tf.data's examples", "[ops][window]") {
  const Dataset seven = Dataset::Range(7);
  CHECK(JsonOf(seven.Window(3)) == Lines{"[0, 1, 2]", "[3, 4, 5]", "[6]"});
  CHECK(JsonOf(seven.Window(3, 0, 1, true)) == Lines{"[0, 1, 2]", "[3, 4, 5]"});
  CHECK(JsonOf(seven.Window(3, 2, 1, true)) == Lines{"[0, 1, 2]", "[2, 3, 4]", "[4, 5, 6]"});
  CHECK(JsonOf(seven.Window(3, 1, 2, true)) == Lines{"[0, 2, 4]", "[1, 3, 5]", "[2, 4, 6]"});
  // Without drop_remainder, a window starts every shift while any element
  // is left; a shift past the window skips elements.
  CHECK(JsonOf(seven.Window(3, 2)) == Lines{"[0, 1, 2]", "[2, 3, 4]", "[4, 5, 6]", "[6]"});
  CHECK(JsonOf(seven.Window(2, 3)) == Lines{"[0, 1]", "[3, 4]", "[6]"});
  // Several components are windowed together.
  CHECK(JsonOf(Dataset::Zip({Dataset::Range(3), Dataset::Range(10, 13)}).Window(2)) ==
        Lines{"[[0, 1], [10, 11]]", "[[2], [12]]"});
}

TEST_CASE("window: flat_map over windows, as tf.data's window(...).flat_map", "[ops][window][flat_map]") {
  // tf.data: range(7).window(3, shift=2, drop_remainder=True)
  //              .flat_map(lambda w: w.batch(2)).
  CHECK(JsonOf(Dataset::Range(7).Window(3, 2, 1, true).FlatMap(Rows().Batch(2))) ==
        Lines{"[0, 1]", "[2]", "[2, 3]", "[4]", "[4, 5]", "[6]"});
  CHECK(IntsOf(Dataset::Range(7).Window(3, 1, 2, true).FlatMap(Rows())) ==
        std::vector<int64_t>{0, 2, 4, 1, 3, 5, 2, 4, 6});
  CHECK(Yaml("pipeline:\n"
             "  - range: 7\n"
             "  - window: {size: 3, shift: 2, drop_remainder: true}\n"
             "  - flat_map: [from_tensor_slices, {batch: 2}]\n") ==
        Lines{"[0, 1]", "[2]", "[2, 3]", "[4]", "[4, 5]", "[6]"});
  CHECK(testing::YamlFingerprint(
            "pipeline:\n  - range: 7\n  - window: {size: 3, shift: 2, drop_remainder: true}\n"
            "  - flat_map: [from_tensor_slices]\n") ==
        Dataset::Range(7).Window(3, 2, 1, true).FlatMap(Rows()).Fingerprint());
  // Outside a flat_map, from_tensor_slices needs tensors of its own.
  CHECK(BuildError(Rows()).message() == "step 1 (from_tensor_slices): needs at least one tensor");
}

TEST_CASE("window: spec, cardinality and errors", "[ops][window]") {
  CHECK(MustBuild(Dataset::Range(7).Window(3))->element_spec().DebugString() ==
        "TensorSpec(shape=[?], dtype=int64)");
  CHECK(MustBuild(Dataset::Range(7).Window(3, 2, 1, true))->element_spec().DebugString() ==
        "TensorSpec(shape=[3], dtype=int64)");
  CHECK(MustBuild(Dataset::Range(7).Window(3))->Cardinality() == 3);
  CHECK(MustBuild(Dataset::Range(7).Window(3, 2))->Cardinality() == 4);
  CHECK(MustBuild(Dataset::Range(7).Window(3, 1, 2, true))->Cardinality() == 3);
  CHECK(MustBuild(Dataset::Range(4).Window(5, 1, 1, true))->Cardinality() == 0);
  CHECK(MustBuild(Dataset::Range(7).Repeat().Window(3))->Cardinality() == kInfiniteCardinality);
  CHECK(BuildError(Dataset::Range(7).Window(0)).message() == "step 2 (window): size must be > 0, got 0");
  CHECK(BuildError(Dataset::Range(7).Window(3, -1)).message() ==
        "step 2 (window): shift and stride must be > 0 (or 0 or omitted: size and 1), got -1 and 1");
  CHECK(BuildError(Dataset::Range(7).Window(int64_t{1} << 30)).message() ==
        "step 2 (window): size and stride must be at most 16777216, got 1073741824 and 1");
  CHECK(Yaml("pipeline:\n  - range: 5\n  - window: 2\n") == Lines{"[0, 1]", "[2, 3]", "[4]"});
}

}  // namespace
}  // namespace sluice
