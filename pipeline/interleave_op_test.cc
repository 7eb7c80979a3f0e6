// Tests of flat_map (interleave_op.cc, an interleave with cycle_length 1);
// interleave's own tests are in parallel_ops_test.cc.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::BuildError;
using testing::JsonOf;
using testing::MustBuild;
using testing::Yaml;
using Lines = std::vector<std::string>;

// Three text files of 3, 2 and 4 lines, and an empty one.
class TextFiles {
 public:
  TextFiles() {
    testing::WriteFile(Path("a.txt"), "a0\na1\na2\n");
    testing::WriteFile(Path("b.txt"), "b0\nb1\n");
    testing::WriteFile(Path("c.txt"), "c0\nc1\nc2\nc3\n");
    testing::WriteFile(Path("empty.txt"), "");
  }
  std::string Path(const std::string& name) const { return dir_.File(name); }
  Dataset Files(const std::vector<std::string>& names) const {
    std::vector<std::string> paths;
    for (const std::string& name : names) paths.push_back(Path(name));
    return Dataset::FromTensorSlices({Tensor::FromVector<std::string>(paths)});
  }

 private:
  testing::TempDir dir_;
};

TEST_CASE("flat_map: each element's sub-pipeline in turn, as tf.data's", "[ops][flat_map]") {
  TextFiles files;
  // tf.data: from_tensor_slices(files).flat_map(TextLineDataset).
  const Lines expected = {"\"a0\"", "\"a1\"", "\"a2\"", "\"b0\"", "\"b1\"",
                          "\"c0\"", "\"c1\"", "\"c2\"", "\"c3\""};
  CHECK(JsonOf(files.Files({"a.txt", "b.txt", "c.txt"}).FlatMap(Dataset::TextLine({}))) == expected);
  CHECK(JsonOf(files.Files({"a.txt", "empty.txt", "b.txt", "c.txt"}).FlatMap(Dataset::TextLine({}))) ==
        expected);
  // The same definition as interleave with cycle_length 1 gives the same.
  CHECK(JsonOf(files.Files({"a.txt", "b.txt", "c.txt"}).Interleave(Dataset::TextLine({}), 1)) == expected);
  const std::string input = "  - from_tensor_slices: [\"" + files.Path("a.txt") + "\", \"" +
                            files.Path("b.txt") + "\", \"" + files.Path("c.txt") + "\"]\n";
  CHECK(Yaml("pipeline:\n" + input + "  - flat_map: {pipeline: [text_line]}\n") == expected);
  // The shorthand, with transforms of the sub-pipeline's own.
  CHECK(Yaml("pipeline:\n" + input + "  - flat_map: [text_line, {skip: 1}, {take: 1}]\n") ==
        Lines{"\"a1\"", "\"b1\"", "\"c1\""});
}

TEST_CASE("flat_map: YAML gives the SDK's definition", "[ops][flat_map][yaml]") {
  CHECK(testing::YamlFingerprint("pipeline:\n  - from_tensor_slices: [a.txt, b.txt]\n"
                                 "  - flat_map: [text_line, {take: 2}]\n") ==
        Dataset::FromTensorSlices({Tensor::FromVector<std::string>({"a.txt", "b.txt"})})
            .FlatMap(Dataset::TextLine({}).Take(2))
            .Fingerprint());
}

TEST_CASE("flat_map: errors name the step and the sub-pipeline", "[ops][flat_map]") {
  const absl::Status no_files = BuildError(Dataset::Range(3).FlatMap(Dataset::TextLine({})));
  CHECK(
      no_files.message() ==
      "step 2 (flat_map): step 1 (text_line): the interleaved element has no string component to read files "
      "from");
  absl::StatusOr<Lines> empty = testing::RunYaml("pipeline:\n  - range: 3\n  - flat_map: {pipeline: []}\n");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message() == "test.yaml:3:26: the pipeline has no steps");
  CHECK(MustBuild(
            Dataset::FromTensorSlices({Tensor::FromVector<std::string>({})}).FlatMap(Dataset::TextLine({})))
            ->Cardinality() == 0);
}

}  // namespace
}  // namespace sluice
