// Tests of the image_folder source and the ignore_errors step.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "pipeline/dataset.h"
#include "pipeline/ops.h"
#include "pipeline/sharding.h"
#include "pipeline/yaml_loader.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using testing::TempDir;

// root/cat/{b.jpg, a.PNG, notes.txt, deep/c.jpeg}, root/ant/{z.jpg},
// root/empty/: ant sorts first, so it is label 0.
void MakeFolder(const TempDir& dir) {
  std::filesystem::create_directories(dir.File("root/cat/deep"));
  std::filesystem::create_directories(dir.File("root/ant"));
  std::filesystem::create_directories(dir.File("root/empty"));
  testing::WriteFile(dir.File("root/cat/b.jpg"), "bytes of b");
  testing::WriteFile(dir.File("root/cat/a.PNG"), "bytes of a");
  testing::WriteFile(dir.File("root/cat/notes.txt"), "not an image");
  testing::WriteFile(dir.File("root/cat/deep/c.jpeg"), "");
  testing::WriteFile(dir.File("root/ant/z.jpg"), std::string("z\0z", 3));
  testing::WriteFile(dir.File("root/stray.jpg"), "not in a class folder");
}

TEST_CASE("image_folder lists root/CLASS/FILE with labels in sorted class order", "[image]") {
  TempDir dir;
  MakeFolder(dir);
  const std::string root = dir.File("root");
  CHECK(testing::Yaml(absl::StrCat("pipeline:\n  - image_folder: ", root, "\n")) ==
        std::vector<std::string>{
            absl::StrCat(R"({"image": "z\u0000z", "label": 0, "path": ")", root, R"(/ant/z.jpg"})"),
            absl::StrCat(R"({"image": "bytes of a", "label": 1, "path": ")", root, R"(/cat/a.PNG"})"),
            absl::StrCat(R"({"image": "bytes of b", "label": 1, "path": ")", root, R"(/cat/b.jpg"})"),
            absl::StrCat(R"({"image": "", "label": 1, "path": ")", root, R"(/cat/deep/c.jpeg"})"),
        });
  absl::StatusOr<DatasetPtr> built = testing::DatasetFromYaml(absl::StrCat("- image_folder: ", root, "\n"));
  REQUIRE(built.ok());
  CHECK((*built)->Cardinality() == 4);
  CHECK((*built)->element_spec().names == std::vector<std::string>{"image", "label", "path"});
  CHECK(*ImageFolderClasses(root) == std::vector<std::string>{"ant", "cat", "empty"});
  // Chosen extensions, with or without the dot, in any case.
  CHECK(testing::Yaml(absl::StrCat("- image_folder: {root: ", root, ", extensions: [.TXT]}\n")) ==
        std::vector<std::string>{
            absl::StrCat(R"({"image": "not an image", "label": 1, "path": ")", root, R"(/cat/notes.txt"})")});
}

TEST_CASE("image_folder shuffles file names per epoch, reproducibly with a seed", "[image]") {
  TempDir dir;
  MakeFolder(dir);
  const std::string yaml =
      absl::StrCat("- image_folder: {root: ", dir.File("root"), ", shuffle: true, seed: 3}\n");
  std::vector<std::string> first = testing::Yaml(yaml);
  std::vector<std::string> again = testing::Yaml(yaml);
  CHECK(first == again);  // a new build, the same seed: the same order
  std::vector<std::string> sorted = testing::Yaml(absl::StrCat("- image_folder: ", dir.File("root"), "\n"));
  std::vector<std::string> shuffled = first;
  std::sort(shuffled.begin(), shuffled.end());
  std::sort(sorted.begin(), sorted.end());
  CHECK(shuffled == sorted);  // the same files
  // Epochs of one dataset differ (4 files: 24 orders; 3 epochs all equal
  // would be a 1 in 576 chance).
  std::vector<std::string> epochs = testing::Yaml(yaml + "- repeat: 3\n");
  REQUIRE(epochs.size() == 12);
  CHECK_FALSE((std::equal(epochs.begin(), epochs.begin() + 4, epochs.begin() + 4) &&
               std::equal(epochs.begin(), epochs.begin() + 4, epochs.begin() + 8)));
}

TEST_CASE("image_folder errors name the root", "[image]") {
  TempDir dir;
  MakeFolder(dir);
  absl::StatusOr<DatasetPtr> missing =
      testing::DatasetFromYaml(absl::StrCat("- image_folder: ", dir.File("nope"), "\n"));
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(
      std::string(missing.status().message()),
      Contains(absl::StrCat("step 1 (image_folder): root '", dir.File("nope"), "' is not a directory")));
  std::filesystem::create_directories(dir.File("flat"));
  testing::WriteFile(dir.File("flat/a.jpg"), "x");
  absl::StatusOr<DatasetPtr> flat =
      testing::DatasetFromYaml(absl::StrCat("- image_folder: ", dir.File("flat"), "\n"));
  CHECK_THAT(std::string(flat.status().message()),
             Contains(absl::StrCat("step 1 (image_folder): '", dir.File("flat"),
                                   "' has no class folders (expected root/CLASS/FILE)")));
  absl::StatusOr<DatasetPtr> none = testing::DatasetFromYaml(
      absl::StrCat("- image_folder: {root: ", dir.File("root"), ", extensions: [gif]}\n"));
  CHECK_THAT(std::string(none.status().message()),
             Contains(absl::StrCat("step 1 (image_folder): no files with extension gif under '",
                                   dir.File("root"), "/CLASS/'")));
  CHECK_THAT(
      std::string(testing::DatasetFromYaml("- image_folder: {extensions: [jpg]}\n").status().message()),
      Contains("step 1 (image_folder): missing 'root'"));
  // A file that goes away after the listing is an error of that element.
  absl::StatusOr<DatasetPtr> built =
      testing::DatasetFromYaml(absl::StrCat("- image_folder: ", dir.File("root"), "\n"));
  REQUIRE(built.ok());
  std::filesystem::remove(dir.File("root/cat/b.jpg"));
  absl::StatusOr<std::vector<std::string>> lines = testing::JsonLines(**built);
  CHECK(lines.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(lines.status().message()),
             Contains(absl::StrCat("image_folder: cannot open '", dir.File("root/cat/b.jpg"), "'")));
}

TEST_CASE("FILE sharding gives each shard its own image files", "[image]") {
  TempDir dir;
  MakeFolder(dir);
  std::vector<std::string> all;
  for (int index = 0; index < 2; ++index) {
    absl::StatusOr<LoadedPipeline> loaded =
        ParsePipelineYaml(absl::StrCat("- image_folder: ", dir.File("root"), "\n"), "test.yaml");
    REQUIRE(loaded.ok());
    REQUIRE(ShardDatasetDef(ShardBy::kFile, 2, index, 1, {"FILE sharding", "workers"}, &loaded->def).ok());
    CHECK(loaded->def.steps(0).image_folder().num_shards() == 2);
    absl::StatusOr<DatasetPtr> built = BuildDataset(loaded->def);
    REQUIRE(built.ok());
    CHECK((*built)->Cardinality() == 2);
    absl::StatusOr<std::vector<std::string>> lines = testing::JsonLines(**built);
    REQUIRE(lines.ok());
    all.insert(all.end(), lines->begin(), lines->end());
    // Sharding twice is refused.
    absl::Status again = ShardDatasetDef(ShardBy::kFile, 2, 0, 1, {"FILE sharding", "workers"}, &loaded->def);
    CHECK(again.code() == absl::StatusCode::kFailedPrecondition);
  }
  std::sort(all.begin(), all.end());
  CHECK(all.size() == 4);
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
}

TEST_CASE("ignore_errors drops failed elements and keeps the rest in order", "[image]") {
  // decode_raw of strings of unequal length fails on those elements only.
  const std::string yaml =
      "- from_tensor_slices: [abcd, xyz, efgh, ab, ijkl]\n"
      "- map: {fn: decode_raw, dtype: int32}\n";
  absl::StatusOr<std::vector<std::string>> failing = testing::RunYaml(yaml);
  CHECK(failing.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(testing::Yaml(yaml + "- ignore_errors: {quiet: true}\n").size() == 3);
  CHECK(testing::Yaml(
            yaml +
            "- ignore_errors\n- map: {fn: cast, dtype: int64}\n- map: {fn: floordiv, value: 16777216}\n") ==
        std::vector<std::string>{"[100]", "[104]", "[108]"});
}

TEST_CASE("ignore_errors gives up on an input that repeats one error forever", "[image]") {
  // A map that fails on every element of an infinite input: each error is
  // the same, so after 100 in a row the read ends with it.
  absl::StatusOr<std::vector<std::string>> stuck = testing::RunYaml(
      "- from_tensors: xyz\n- repeat\n- map: {fn: decode_raw, dtype: int32}\n- ignore_errors: {quiet: "
      "true}\n",
      /*limit=*/10);
  CHECK(stuck.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(stuck.status().message()),
             Contains("ignore_errors: the same error 100 times in a row; the input cannot go on: "));
}

}  // namespace
}  // namespace sluice
