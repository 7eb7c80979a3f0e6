#include "pipeline/data_paths.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "pipeline/yaml_loader.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST_CASE("data_paths: relative file names and patterns resolve against the given folder",
          "[pipeline][hardening]") {
  proto::DatasetDef def;
  def.add_steps()->mutable_text_line()->add_files("a.txt");
  def.mutable_steps(0)->mutable_text_line()->add_files("/abs/b.txt");
  def.mutable_steps(0)->mutable_text_line()->add_files("gs://bucket/c.txt");
  def.add_steps()->mutable_list_files()->add_pattern("../data/*.tfrecord");
  // Nested pipelines, as interleave's, are covered too.
  proto::DatasetDef* nested = def.add_steps()->mutable_interleave()->mutable_pipeline();
  nested->add_steps()->mutable_tfrecord()->add_files("sub/d.tfrecord");
  ResolveDataPaths("/srv/pipelines", &def);
  CHECK(def.steps(0).text_line().files(0) == "/srv/pipelines/a.txt");
  CHECK(def.steps(0).text_line().files(1) == "/abs/b.txt");
  CHECK(def.steps(0).text_line().files(2) == "gs://bucket/c.txt");
  CHECK(def.steps(1).list_files().pattern(0) == "/srv/data/*.tfrecord");
  CHECK(def.steps(2).interleave().pipeline().steps(0).tfrecord().files(0) == "/srv/pipelines/sub/d.tfrecord");
}

TEST_CASE("data_paths: the sub-pipelines of concatenate, flat_map and the mixing ops resolve too",
          "[pipeline][hardening]") {
  proto::DatasetDef def;
  auto* mix = def.add_steps()->mutable_choose_from_datasets();
  mix->add_datasets()->add_steps()->mutable_text_line()->add_files("a.txt");
  mix->mutable_choice_pipeline()->add_steps()->mutable_text_line()->add_files("choice.txt");
  def.add_steps()->mutable_concatenate()->mutable_pipeline()->add_steps()->mutable_tfrecord()->add_files(
      "c.rec");
  def.add_steps()->mutable_flat_map()->mutable_pipeline()->add_steps()->mutable_list_files()->add_pattern(
      "f/*");
  proto::DatasetDef sampled;
  sampled.add_steps()
      ->mutable_sample_from_datasets()
      ->add_datasets()
      ->add_steps()
      ->mutable_text_line()
      ->add_files("../up.txt");
  ResolveDataPaths("/srv/p", &def);
  ResolveDataPaths("/srv/p", &sampled);
  CHECK(def.steps(0).choose_from_datasets().datasets(0).steps(0).text_line().files(0) == "/srv/p/a.txt");
  CHECK(def.steps(0).choose_from_datasets().choice_pipeline().steps(0).text_line().files(0) ==
        "/srv/p/choice.txt");
  CHECK(def.steps(1).concatenate().pipeline().steps(0).tfrecord().files(0) == "/srv/p/c.rec");
  CHECK(def.steps(2).flat_map().pipeline().steps(0).list_files().pattern(0) == "/srv/p/f/*");
  CHECK(sampled.steps(0).sample_from_datasets().datasets(0).steps(0).text_line().files(0) == "/srv/up.txt");
}

TEST_CASE("data_paths: a pipeline file reads its data beside it, from any current directory",
          "[pipeline][hardening]") {
  TempDir dir;
  std::filesystem::create_directories(dir.File("conf"));
  WriteFile(dir.File("conf/lines.txt"), "x\ny\n");
  const std::string path = dir.File("conf/p.yaml");
  WriteFile(path, "pipeline:\n  - text_line: [lines.txt]\n");
  absl::StatusOr<LoadedPipeline> loaded = LoadPipelineFile(path);
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  CHECK(loaded->def.steps(0).text_line().files(0) ==
        (std::filesystem::path(dir.path()) / "conf/lines.txt").lexically_normal().string());
  absl::StatusOr<std::vector<std::string>> lines = testing::JsonLines(**BuildDataset(loaded->def));
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"\"x\"", "\"y\""});
}

TEST_CASE("yaml: a pipeline key set twice names both lines", "[pipeline][hardening]") {
  absl::StatusOr<LoadedPipeline> loaded =
      ParsePipelineYaml("pipeline:\n  - range: 10\n  - batch: {batch_size: 2, batch_size: 3}\n", "p.yaml");
  CHECK(loaded.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(loaded.status().message() ==
        "p.yaml:3:28: 'batch_size' is set twice (first at line 3); a key may appear once");
}

}  // namespace
}  // namespace sluice
