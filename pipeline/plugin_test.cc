// Tests of element-function plugins: loading the example plugin
// (pipeline/plugin_example) from YAML and with LoadPlugin, and the errors
// for libraries that do not load.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "pipeline/builder.h"
#include "pipeline/function.h"
#include "pipeline/yaml_loader.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;

using Lines = std::vector<std::string>;

const std::string kPlugin = SLUICE_EXAMPLE_PLUGIN;

Lines Run(const std::string& text) {
  INFO(text);
  absl::StatusOr<Lines> lines = testing::RunYaml(text);
  if (!lines.ok()) FAIL(lines.status().message());
  return *std::move(lines);
}

Lines Collect(const Dataset& dataset) {
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  if (!built.ok()) FAIL(built.status().message());
  absl::StatusOr<Lines> lines = testing::JsonLines(**built);
  REQUIRE(lines.ok());
  return *std::move(lines);
}

TEST_CASE("plugin: the example plugin from a YAML plugins entry", "[plugin]") {
  REQUIRE(std::filesystem::path(kPlugin).is_absolute());
  const std::string text = absl::StrCat("plugins: [", kPlugin,
                                        "]\n"
                                        "pipeline:\n"
                                        "  - range: 5\n"
                                        "  - map: {fn: example.affine, scale: 3, offset: 1}\n");
  CHECK(Run(text) == Lines{"1", "4", "7", "10", "13"});

  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(text, "test.yaml");
  REQUIRE(loaded.ok());
  REQUIRE(loaded->def.plugins_size() == 1);
  CHECK(loaded->def.plugins(0) == std::filesystem::path(kPlugin).lexically_normal().string());
  REQUIRE(loaded->def.steps_size() == 2);
  CHECK(loaded->def.steps(1).map().fn().name() == "example.affine");
  CHECK(loaded->def.steps(1).map().fn().args().at("scale").i() == 3);
  CHECK(loaded->def.steps(1).map().fn().args().at("offset").i() == 1);

  // A single path without a list works too.
  CHECK(Run(absl::StrCat("plugins: ", kPlugin,
                         "\npipeline:\n  - range: 3\n  - map: {fn: example.affine, offset: -1}\n")) ==
        Lines{"-1", "0", "1"});
}

TEST_CASE("plugin: the example plugin with LoadPlugin", "[plugin]") {
  REQUIRE(LoadPlugin(kPlugin).ok());
  // Loading again is a no-op, not a duplicate registration.
  REQUIRE(LoadPlugin(kPlugin).ok());
  const FunctionRegistry& registry = FunctionRegistry::Global();
  CHECK(registry.Contains("example.affine"));
  CHECK(registry.Contains("example.is_even"));
  CHECK(registry.Description("example.affine") == "x * scale + offset (example plugin)");
  CHECK(registry.Description("example.is_even") == "true for even int64 values (example plugin)");

  CHECK(Collect(Dataset::Range(5).Map("example.affine", {{"scale", 3}, {"offset", 1}})) ==
        Lines{"1", "4", "7", "10", "13"});
  // Defaults: scale 1, offset 0.
  CHECK(Collect(Dataset::Range(3).Map("example.affine")) == Lines{"0", "1", "2"});
  // Float components, with float arguments.
  CHECK(Collect(Dataset::FromTensorSlices({Tensor::FromVector<float>({0.5f, 1.5f})})
                    .Map("example.affine", {{"scale", 2.0}, {"offset", 0.25}})) == Lines{"1.25", "3.25"});
}

TEST_CASE("plugin: example.is_even in filter", "[plugin]") {
  CHECK(Run(absl::StrCat("plugins: [", kPlugin,
                         "]\npipeline:\n  - range: 7\n  - filter: {fn: example.is_even}\n")) ==
        Lines{"0", "2", "4", "6"});
  CHECK(Run(absl::StrCat("plugins: [", kPlugin,
                         "]\npipeline:\n  - range: 5\n  - map: {fn: example.affine, scale: 3, offset: 1}\n"
                         "  - filter: example.is_even\n")) == Lines{"4", "10"});
  // Through the builder, which loads the plugin when built.
  CHECK(Collect(Dataset::Range(10).WithPlugin(kPlugin).Filter("example.is_even").Take(3)) ==
        Lines{"0", "2", "4"});
}

TEST_CASE("plugin: plugin functions get the registry's argument checks", "[plugin]") {
  REQUIRE(LoadPlugin(kPlugin).ok());
  proto::FunctionDef def;
  def.set_name("example.affine");
  (*def.mutable_args())["scal"].set_i(3);
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = FunctionRegistry::Global().Create(def);
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()),
             Equals("unknown argument 'scal' for function 'example.affine'; did you mean 'scale'? (valid: "
                    "offset, scale)"));

  def.clear_args();
  def.set_name("example.is_even");
  (*def.mutable_args())["value"].set_i(2);
  fn = FunctionRegistry::Global().Create(def);
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("unknown argument 'value' for function 'example.is_even' (it takes no arguments)"));

  // And its own output-spec checks, at build time.
  absl::StatusOr<DatasetPtr> built =
      internal::BuildPipeline(Dataset::FromTensorSlices({Tensor::FromVector<float>({1.0f})})
                                  .WithPlugin(kPlugin)
                                  .Filter("example.is_even"));
  REQUIRE_FALSE(built.ok());
  CHECK(built.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(built.status().message()), StartsWith("step 2 (filter): "));
  CHECK_THAT(std::string(built.status().message()), Contains("example.is_even: needs one int64 component"));
}

TEST_CASE("plugin: a relative plugin path is resolved against the pipeline file", "[plugin]") {
  testing::TempDir dir;
  const std::filesystem::path relative = std::filesystem::relative(kPlugin, dir.path());
  REQUIRE(relative.is_relative());
  const std::string path = dir.File("pipeline.yaml");
  {
    std::ofstream file(path);
    file << "plugins: [" << relative.string()
         << "]\npipeline:\n  - range: 2\n  - map: {fn: example.affine, scale: 5}\n";
  }
  absl::StatusOr<LoadedPipeline> loaded = LoadPipelineFile(path);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->def.plugins_size() == 1);
  CHECK(std::filesystem::equivalent(loaded->def.plugins(0), kPlugin));
  CHECK(std::filesystem::path(loaded->def.plugins(0)).is_absolute());
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(loaded->def);
  REQUIRE(dataset.ok());
  CHECK(*testing::JsonLines(**dataset) == Lines{"0", "5"});
}

TEST_CASE("plugin: a plugin that does not load", "[plugin]") {
  testing::TempDir dir;
  const std::string missing = dir.File("libmissing_plugin.so");
  absl::Status status = LoadPlugin(missing);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), StartsWith("cannot load plugin '" + missing + "': "));
  CHECK_THAT(std::string(status.message()), Contains("cannot open shared object file"));

  // A file that is not a shared library.
  const std::string text = dir.File("not_a_library.so");
  {
    std::ofstream file(text);
    file << "not an ELF file\n";
  }
  status = LoadPlugin(text);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), StartsWith("cannot load plugin '" + text + "': "));

  // From YAML, with the entry's position ("plugins: [" puts it at column 11).
  absl::StatusOr<LoadedPipeline> loaded =
      ParsePipelineYaml(absl::StrCat("plugins: [", missing, "]\npipeline:\n  - range: 3\n"), "test.yaml");
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(loaded.status().message()),
             StartsWith("test.yaml:1:11: cannot load plugin '" + missing + "': "));

  // A relative path names the resolved path.
  loaded = ParsePipelineYaml("plugins: [libnope.so]\npipeline:\n  - range: 3\n", "test.yaml", dir.path());
  REQUIRE_FALSE(loaded.ok());
  CHECK_THAT(std::string(loaded.status().message()),
             StartsWith("test.yaml:1:11: cannot load plugin '" + dir.File("libnope.so") + "': "));

  // The builder reports it when built.
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(Dataset::Range(3).WithPlugin(missing));
  REQUIRE_FALSE(built.ok());
  CHECK(built.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(built.status().message()), Contains("cannot load plugin '" + missing + "'"));

  loaded = ParsePipelineYaml("plugins: [{a: b}]\npipeline:\n  - range: 3\n", "test.yaml");
  REQUIRE_FALSE(loaded.ok());
  CHECK_THAT(std::string(loaded.status().message()),
             Equals("test.yaml:1:11: plugins: expected a library path"));
}

}  // namespace
}  // namespace sluice
