// Tests of the sources without files: range, from_tensors,
// from_tensor_slices, list_files and zip.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <limits>
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
using testing::WriteFile;
using testing::Yaml;

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using Lines = std::vector<std::string>;

absl::Status YamlError(const std::string& text) {
  absl::StatusOr<Lines> lines = testing::RunYaml(text);
  REQUIRE_FALSE(lines.ok());
  return lines.status();
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// ---------------------------------------------------------------- range

TEST_CASE("source_ops: range with stop only counts from 0", "[ops][range]") {
  CHECK(Yaml("pipeline:\n  - range: 5\n") == Lines{"0", "1", "2", "3", "4"});
  CHECK(JsonOf(Dataset::Range(5)) == Lines{"0", "1", "2", "3", "4"});
  CHECK(MustBuild(Dataset::Range(5))->Cardinality() == 5);
}

TEST_CASE("source_ops: range with start, stop and step", "[ops][range]") {
  CHECK(Yaml("pipeline:\n  - range: {start: 2, stop: 12, step: 3}\n") == Lines{"2", "5", "8", "11"});
  CHECK(JsonOf(Dataset::Range(-3, 3)) == Lines{"-3", "-2", "-1", "0", "1", "2"});
  CHECK(JsonOf(Dataset::Range(0, 10, 3)) == Lines{"0", "3", "6", "9"});
  CHECK(MustBuild(Dataset::Range(0, 10, 3))->Cardinality() == 4);
  CHECK(MustBuild(Dataset::Range(2, 12, 3))->Cardinality() == 4);
  CHECK(MustBuild(Dataset::Range(0, 9, 3))->Cardinality() == 3);
}

TEST_CASE("source_ops: range with a negative step counts down", "[ops][range]") {
  CHECK(JsonOf(Dataset::Range(10, 0, -3)) == Lines{"10", "7", "4", "1"});
  CHECK(MustBuild(Dataset::Range(10, 0, -3))->Cardinality() == 4);
  CHECK(JsonOf(Dataset::Range(5, 0, -1)) == Lines{"5", "4", "3", "2", "1"});
  CHECK(MustBuild(Dataset::Range(5, 0, -1))->Cardinality() == 5);
  CHECK(JsonOf(Dataset::Range(-1, -7, -2)) == Lines{"-1", "-3", "-5"});
  CHECK(MustBuild(Dataset::Range(-1, -7, -2))->Cardinality() == 3);
  CHECK(Yaml("pipeline:\n  - range: {start: 3, stop: -1, step: -2}\n") == Lines{"3", "1"});
}

TEST_CASE("source_ops: empty ranges yield nothing", "[ops][range]") {
  CHECK(JsonOf(Dataset::Range(0)).empty());
  CHECK(JsonOf(Dataset::Range(5, 5)).empty());
  CHECK(JsonOf(Dataset::Range(5, 2)).empty());      // positive step, stop < start
  CHECK(JsonOf(Dataset::Range(0, 5, -1)).empty());  // negative step, stop > start
  CHECK(JsonOf(Dataset::Range(-4)).empty());
  CHECK(MustBuild(Dataset::Range(0))->Cardinality() == 0);
  CHECK(MustBuild(Dataset::Range(5, 2))->Cardinality() == 0);
  CHECK(MustBuild(Dataset::Range(0, 5, -1))->Cardinality() == 0);
  CHECK(MustBuild(Dataset::Range(-4))->Cardinality() == 0);
}

TEST_CASE("source_ops: range with step 0 is an error", "[ops][range]") {
  absl::Status status = BuildError(Dataset::Range(0, 10, 0));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 1 (range): step must not be 0");

  absl::Status yaml = YamlError("pipeline:\n  - range: {stop: 10, step: 0}\n");
  CHECK(yaml.code() == absl::StatusCode::kInvalidArgument);
  CHECK(yaml.message() == "test.yaml:2:5: step 1 (range): step must not be 0");
}

TEST_CASE("source_ops: range element spec is an int64 scalar", "[ops][range]") {
  DatasetPtr dataset = MustBuild(Dataset::Range(3));
  REQUIRE(dataset->element_spec().components.size() == 1);
  CHECK(dataset->element_spec().components[0].dtype == DType::kInt64);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({}));
  CHECK(dataset->element_spec().names.empty());
  CHECK(dataset->DebugName() == "range");
}

// Cardinality is computed without overflowing for ranges near the int64
// limits: range(0, INT64_MAX, 2) holds 0, 2, ..., INT64_MAX - 1.
TEST_CASE("source_ops: range near the int64 limit", "[ops][range]") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  DatasetPtr dataset = MustBuild(Dataset::Range(0, kMax, 2));
  CHECK(dataset->Cardinality() == int64_t{4611686018427387904});
  absl::StatusOr<Lines> lines = testing::JsonLines(*dataset, 3);
  REQUIRE(lines.ok());
  CHECK(*lines == Lines{"0", "2", "4"});

  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  DatasetPtr down = MustBuild(Dataset::Range(0, kMin, -2));
  CHECK(down->Cardinality() == int64_t{4611686018427387904});
  absl::StatusOr<Lines> down_lines = testing::JsonLines(*down, 3);
  REQUIRE(down_lines.ok());
  CHECK(*down_lines == Lines{"0", "-2", "-4"});
}

// ---------------------------------------------------------- from_tensors

TEST_CASE("source_ops: from_tensors yields its tensors once", "[ops][from_tensors]") {
  CHECK(Yaml("pipeline:\n  - from_tensors: [[1, 2], [3, 4]]\n") == Lines{"[[1, 2], [3, 4]]"});
  CHECK(Yaml("pipeline:\n  - from_tensors: 7\n") == Lines{"7"});
  CHECK(Yaml("pipeline:\n  - from_tensors: {tuple: [1, [2, 3]]}\n") == Lines{"[1, [2, 3]]"});
  CHECK(Yaml("pipeline:\n  - from_tensors: {x: 1, y: [a, b]}\n") ==
        Lines{"{\"x\": 1, \"y\": [\"a\", \"b\"]}"});

  DatasetPtr dataset = MustBuild(Dataset::FromTensors({*Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2})}));
  CHECK(dataset->Cardinality() == 1);
  REQUIRE(dataset->element_spec().components.size() == 1);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({2, 2}));
  CHECK(dataset->element_spec().components[0].dtype == DType::kInt64);
  absl::StatusOr<std::vector<Element>> elements = CollectElements(*dataset);
  REQUIRE(elements.ok());
  REQUIRE(elements->size() == 1);
  CHECK((*elements)[0].components[0] == *Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2}));
}

TEST_CASE("source_ops: from_tensors iterator keeps returning end", "[ops][from_tensors]") {
  DatasetPtr dataset = MustBuild(Dataset::FromTensors({Tensor::Scalar<int64_t>(5)}));
  absl::StatusOr<std::unique_ptr<IteratorBase>> it = dataset->MakeIterator(IteratorContext{});
  REQUIRE(it.ok());
  Element element;
  bool end = true;
  REQUIRE((*it)->GetNext(&element, &end).ok());
  CHECK_FALSE(end);
  CHECK(ElementToJson(element) == "5");
  for (int i = 0; i < 3; ++i) {
    end = false;
    REQUIRE((*it)->GetNext(&element, &end).ok());
    CHECK(end);
  }
}

TEST_CASE("source_ops: from_tensors without tensors is an error", "[ops][from_tensors]") {
  absl::Status status = BuildError(Dataset::FromTensors({}));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 1 (from_tensors): needs at least one tensor");
}

// ---------------------------------------------------- from_tensor_slices

TEST_CASE("source_ops: from_tensor_slices of a vector yields scalars", "[ops][from_tensor_slices]") {
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [3, 1, 2]\n") == Lines{"3", "1", "2"});
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [a, b]\n") == Lines{"\"a\"", "\"b\""});
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [true, false]\n") == Lines{"true", "false"});
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [1.5, -2]\n") == Lines{"1.5", "-2"});
  DatasetPtr dataset = MustBuild(Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({3, 1, 2})}));
  CHECK(dataset->Cardinality() == 3);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({}));
}

TEST_CASE("source_ops: from_tensor_slices of a matrix yields rows", "[ops][from_tensor_slices]") {
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: [[1, 2], [3, 4], [5, 6]]\n") ==
        Lines{"[1, 2]", "[3, 4]", "[5, 6]"});
  DatasetPtr dataset =
      MustBuild(Dataset::FromTensorSlices({*Tensor::FromVector<int64_t>({1, 2, 3, 4, 5, 6}, {3, 2})}));
  CHECK(dataset->Cardinality() == 3);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({2}));
  CHECK(dataset->element_spec().components[0].dtype == DType::kInt64);
}

TEST_CASE("source_ops: from_tensor_slices rows share the source buffer", "[ops][from_tensor_slices]") {
  DatasetPtr dataset =
      MustBuild(Dataset::FromTensorSlices({*Tensor::FromVector<int64_t>({1, 2, 3, 4, 5, 6}, {3, 2})}));
  absl::StatusOr<std::vector<Element>> elements = CollectElements(*dataset);
  REQUIRE(elements.ok());
  REQUIRE(elements->size() == 3);
  CHECK((*elements)[0].components[0].SharesBufferWith((*elements)[2].components[0]));
  CHECK((*elements)[2].components[0] == Tensor::FromVector<int64_t>({5, 6}));
}

TEST_CASE("source_ops: from_tensor_slices with named components", "[ops][from_tensor_slices]") {
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: {x: [1, 2, 3], y: [a, b, c]}\n") ==
        Lines{"{\"x\": 1, \"y\": \"a\"}", "{\"x\": 2, \"y\": \"b\"}", "{\"x\": 3, \"y\": \"c\"}"});
  DatasetPtr dataset = MustBuild(Dataset::FromTensorSlices(
      {Tensor::FromVector<int64_t>({1, 2}), *Tensor::FromVector<int64_t>({5, 6, 7, 8}, {2, 2})},
      {"id", "v"}));
  CHECK(dataset->element_spec().names == std::vector<std::string>{"id", "v"});
  absl::StatusOr<Lines> lines = testing::JsonLines(*dataset);
  REQUIRE(lines.ok());
  CHECK(*lines == Lines{"{\"id\": 1, \"v\": [5, 6]}", "{\"id\": 2, \"v\": [7, 8]}"});
}

TEST_CASE("source_ops: from_tensor_slices with a tuple", "[ops][from_tensor_slices]") {
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: {tuple: [[1, 2], [[3, 4], [5, 6]]]}\n") ==
        Lines{"[1, [3, 4]]", "[2, [5, 6]]"});
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: {tuple: [[1, 2], [x, y]]}\n") ==
        Lines{"[1, \"x\"]", "[2, \"y\"]"});
  DatasetPtr dataset = MustBuild(Dataset::FromTensorSlices(
      {Tensor::FromVector<int64_t>({1, 2}), Tensor::FromVector<std::string>({"x", "y"})}));
  CHECK(dataset->element_spec().names.empty());
  CHECK(dataset->element_spec().components.size() == 2);
  CHECK(dataset->element_spec().components[1].dtype == DType::kString);
}

TEST_CASE("source_ops: from_tensor_slices with typed literal", "[ops][from_tensor_slices]") {
  CHECK(Yaml("pipeline:\n  - from_tensor_slices: {values: [1, 2], dtype: int32}\n") == Lines{"1", "2"});
  absl::StatusOr<DatasetPtr> dataset =
      testing::DatasetFromYaml("pipeline:\n  - from_tensor_slices: {values: [1, 2], dtype: int32}\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().components[0].dtype == DType::kInt32);
}

TEST_CASE("source_ops: from_tensor_slices of zero rows is empty", "[ops][from_tensor_slices]") {
  DatasetPtr dataset = MustBuild(Dataset::FromTensorSlices({*Tensor::FromVector<int64_t>({}, {0, 3})}));
  CHECK(dataset->Cardinality() == 0);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({3}));
  absl::StatusOr<Lines> lines = testing::JsonLines(*dataset);
  REQUIRE(lines.ok());
  CHECK(lines->empty());
}

TEST_CASE("source_ops: from_tensor_slices with mismatched first dimensions is an error",
          "[ops][from_tensor_slices]") {
  absl::Status status = BuildError(Dataset::FromTensorSlices(
      {Tensor::FromVector<int64_t>({1, 2}), Tensor::FromVector<int64_t>({1, 2, 3})}));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() ==
        "step 1 (from_tensor_slices): components have different first dimensions, 2 and 3");

  absl::Status yaml = YamlError("pipeline:\n  - from_tensor_slices: {x: [1, 2, 3], y: [1, 2]}\n");
  CHECK(yaml.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(yaml.message()), StartsWith("test.yaml:2:5: step 1 (from_tensor_slices): "));
  CHECK_THAT(std::string(yaml.message()), Contains("components have different first dimensions, 3 and 2"));
}

TEST_CASE("source_ops: from_tensor_slices of a scalar is an error", "[ops][from_tensor_slices]") {
  absl::Status status = BuildError(Dataset::FromTensorSlices({Tensor::Scalar<int64_t>(4)}));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() ==
        "step 1 (from_tensor_slices): component 0 is a scalar; it needs a dimension to "
        "slice");

  absl::Status second =
      BuildError(Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({1, 2}), Tensor::StringScalar("s")}));
  CHECK(second.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(second.message()), Contains("component 1 is a scalar"));

  absl::Status yaml = YamlError("pipeline:\n  - from_tensor_slices: 5\n");
  CHECK(yaml.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(yaml.message()), Contains("step 1 (from_tensor_slices): component 0 is a scalar"));
}

// ---------------------------------------------------------------- list_files

class FileTree {
 public:
  FileTree() {
    for (const char* name : {"c.txt", "a.txt", "e.txt", "b.txt", "d.txt", "f.txt", "g.txt", "h.txt"}) {
      WriteFile(dir_.File(name), name);
    }
    WriteFile(dir_.File("other.dat"), "x");
  }
  std::string Pattern(const std::string& glob) const { return dir_.File(glob); }
  std::string File(const std::string& name) const { return dir_.File(name); }
  Lines QuotedFiles(const std::vector<std::string>& names) const {
    Lines out;
    for (const std::string& name : names) out.push_back(Quoted(File(name)));
    return out;
  }

 private:
  testing::TempDir dir_;
};

TEST_CASE("source_ops: list_files without shuffle is sorted", "[ops][list_files]") {
  FileTree tree;
  const Lines sorted =
      tree.QuotedFiles({"a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt", "g.txt", "h.txt"});
  CHECK(JsonOf(Dataset::ListFiles({tree.Pattern("*.txt")}, /*shuffle=*/false)) == sorted);
  CHECK(Yaml("pipeline:\n  - list_files: {pattern: \"" + tree.Pattern("*.txt") + "\", shuffle: false}\n") ==
        sorted);
  DatasetPtr dataset = MustBuild(Dataset::ListFiles({tree.Pattern("*.txt")}, false));
  CHECK(dataset->Cardinality() == 8);
  CHECK(dataset->element_spec().components[0].dtype == DType::kString);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({}));
}

TEST_CASE("source_ops: list_files merges and deduplicates patterns", "[ops][list_files]") {
  FileTree tree;
  CHECK(JsonOf(Dataset::ListFiles({tree.Pattern("[cb].txt"), tree.Pattern("*.dat"), tree.Pattern("a*")},
                                  false)) == tree.QuotedFiles({"a.txt", "b.txt", "c.txt", "other.dat"}));
  CHECK(JsonOf(Dataset::ListFiles({tree.Pattern("a.txt"), tree.Pattern("?.txt")}, false)) ==
        tree.QuotedFiles({"a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt", "g.txt", "h.txt"}));
}

TEST_CASE("source_ops: list_files with a seed shuffles deterministically", "[ops][list_files]") {
  FileTree tree;
  const Lines sorted =
      tree.QuotedFiles({"a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt", "g.txt", "h.txt"});
  const Lines first = JsonOf(Dataset::ListFiles({tree.Pattern("*.txt")}, true, 42));
  const Lines second = JsonOf(Dataset::ListFiles({tree.Pattern("*.txt")}, true, 42));
  CHECK(first == second);
  CHECK(first != sorted);
  Lines first_sorted = first;
  std::sort(first_sorted.begin(), first_sorted.end());
  CHECK(first_sorted == sorted);

  // The same seed through YAML gives the same definition, so the same order.
  CHECK(Yaml("pipeline:\n  - list_files: {pattern: \"" + tree.Pattern("*.txt") + "\", seed: 42}\n") == first);
}

TEST_CASE("source_ops: list_files without matches is an error", "[ops][list_files]") {
  FileTree tree;
  const std::string pattern = tree.Pattern("*.none");
  absl::Status status = BuildError(Dataset::ListFiles({pattern}, false));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 1 (list_files): no files match '" + pattern + "'");

  absl::Status two = BuildError(Dataset::ListFiles({pattern, tree.Pattern("*.nothing")}, false));
  CHECK(two.code() == absl::StatusCode::kInvalidArgument);
  CHECK(two.message() == "step 1 (list_files): no files match '" + pattern + "' or 1 more");

  absl::Status yaml = YamlError("pipeline:\n  - list_files: \"" + pattern + "\"\n");
  CHECK(yaml.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(yaml.message()), Contains("step 1 (list_files): no files match '" + pattern));
}

TEST_CASE("source_ops: list_files without a pattern is an error", "[ops][list_files]") {
  absl::Status status = BuildError(Dataset::ListFiles({}, false));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 1 (list_files): missing 'pattern'");
}

// ---------------------------------------------------------------- zip

TEST_CASE("source_ops: zip pairs elements and stops at the shortest input", "[ops][zip]") {
  const Dataset zipped = Dataset::Zip({Dataset::Range(3), Dataset::Range(10, 15)});
  CHECK(JsonOf(zipped) == Lines{"[0, 10]", "[1, 11]", "[2, 12]"});
  CHECK(MustBuild(zipped)->Cardinality() == 3);

  const Dataset reversed = Dataset::Zip({Dataset::Range(10, 15), Dataset::Range(3)});
  CHECK(JsonOf(reversed) == Lines{"[10, 0]", "[11, 1]", "[12, 2]"});
  CHECK(MustBuild(reversed)->Cardinality() == 3);
}

TEST_CASE("source_ops: zip of three inputs flattens their components", "[ops][zip]") {
  const Dataset zipped = Dataset::Zip(
      {Dataset::Range(2), Dataset::FromTensorSlices({Tensor::FromVector<std::string>({"a", "b", "c"})}),
       Dataset::Range(5).Map("square")});
  CHECK(JsonOf(zipped) == Lines{"[0, \"a\", 0]", "[1, \"b\", 1]"});
  DatasetPtr dataset = MustBuild(zipped);
  CHECK(dataset->Cardinality() == 2);
  REQUIRE(dataset->element_spec().components.size() == 3);
  CHECK(dataset->element_spec().components[1].dtype == DType::kString);
}

TEST_CASE("source_ops: zip from YAML", "[ops][zip]") {
  CHECK(Yaml("pipeline:\n"
             "  - zip:\n"
             "      - [{range: 3}]\n"
             "      - [{range: {start: 4, stop: 9}}, {map: {fn: square}}]\n") ==
        Lines{"[0, 16]", "[1, 25]", "[2, 36]"});
}

TEST_CASE("source_ops: zip cardinality", "[ops][zip]") {
  CHECK(MustBuild(Dataset::Zip({Dataset::Range(4), Dataset::Range(10).Repeat()}))->Cardinality() == 4);
  CHECK(MustBuild(Dataset::Zip({Dataset::Range(4).Repeat(), Dataset::Range(2).Repeat()}))->Cardinality() ==
        kInfiniteCardinality);
  CHECK(MustBuild(Dataset::Zip({Dataset::Range(4), Dataset::Range(0)}))->Cardinality() == 0);
  const Dataset unknown = Dataset::Range(10).Filter("less", {{"value", 5}});
  CHECK(MustBuild(Dataset::Zip({unknown, Dataset::Range(3).Repeat()}))->Cardinality() == kUnknownCardinality);
  CHECK(MustBuild(Dataset::Zip({Dataset::Range(3).Repeat(), unknown}))->Cardinality() == kUnknownCardinality);
  // An infinite input zipped with a finite one ends with the finite one.
  CHECK(JsonOf(Dataset::Zip({Dataset::Range(2).Repeat(), Dataset::Range(5)})) ==
        Lines{"[0, 0]", "[1, 1]", "[0, 2]", "[1, 3]", "[0, 4]"});
}

// As in tf.data, a zip with an input of unknown cardinality has unknown
// cardinality: the unknown input may be the shortest.
TEST_CASE("source_ops: zip with an unknown input has unknown cardinality", "[ops][zip]") {
  const Dataset one = Dataset::Range(10).Filter("less", {{"value", 1}});  // yields only 0
  const Dataset zipped = Dataset::Zip({Dataset::Range(3), one});
  CHECK(JsonOf(zipped) == Lines{"[0, 0]"});
  CHECK(MustBuild(zipped)->Cardinality() == kUnknownCardinality);
  CHECK(MustBuild(Dataset::Zip({one, Dataset::Range(3)}))->Cardinality() == kUnknownCardinality);
}

TEST_CASE("source_ops: zip merges component names", "[ops][zip]") {
  const Dataset x = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({1, 2, 3})}, {"x"});
  const Dataset yz = Dataset::FromTensorSlices(
      {Tensor::FromVector<int64_t>({4, 5}), Tensor::FromVector<std::string>({"p", "q"})}, {"y", "z"});
  const Dataset zipped = Dataset::Zip({x, yz});
  CHECK(JsonOf(zipped) == Lines{"{\"x\": 1, \"y\": 4, \"z\": \"p\"}", "{\"x\": 2, \"y\": 5, \"z\": \"q\"}"});
  DatasetPtr dataset = MustBuild(zipped);
  CHECK(dataset->element_spec().names == std::vector<std::string>{"x", "y", "z"});
  CHECK(dataset->Cardinality() == 2);
}

TEST_CASE("source_ops: zip with a duplicate component name is an error", "[ops][zip]") {
  const Dataset a = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({1, 2})}, {"x"});
  const Dataset b = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({3, 4})}, {"x"});
  absl::Status status = BuildError(Dataset::Zip({a, b}));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 1 (zip): component name 'x' appears twice");
}

TEST_CASE("source_ops: zip needs two datasets and reports which one fails", "[ops][zip]") {
  absl::Status one = BuildError(Dataset::Zip({Dataset::Range(3)}));
  CHECK(one.code() == absl::StatusCode::kInvalidArgument);
  CHECK(one.message() == "step 1 (zip): needs at least two datasets");

  absl::Status inner = BuildError(Dataset::Zip({Dataset::Range(3), Dataset::Range(0, 3, 0)}));
  CHECK(inner.code() == absl::StatusCode::kInvalidArgument);
  CHECK(inner.message() == "step 1 (zip): dataset 2: step 1 (range): step must not be 0");
}

}  // namespace
}  // namespace sluice
