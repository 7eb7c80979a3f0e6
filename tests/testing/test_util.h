// Helpers shared by the unit tests: building datasets from YAML text or a
// builder, and turning elements into compact comparable values.
#ifndef SLUICE_TESTS_TESTING_TEST_UTIL_H_
#define SLUICE_TESTS_TESTING_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/dataset_internal.h"
#include "common/json.h"
#include "pipeline/builder.h"
#include "pipeline/dataset.h"
#include "pipeline/yaml_loader.h"
#include "sluice/dataset.h"
#include "sluice/element.h"

namespace sluice::testing {

// Parses YAML pipeline text (source name "test.yaml") and builds it.
inline absl::StatusOr<DatasetPtr> DatasetFromYaml(const std::string& text) {
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(text, "test.yaml");
  if (!loaded.ok()) return loaded.status();
  return BuildDataset(loaded->def);
}

// The fingerprint of a YAML pipeline's definition (as "test.yaml").
inline std::string YamlFingerprint(const std::string& text) {
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(text, "test.yaml");
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  return DatasetFingerprint(loaded->def);
}

// Every element of the dataset as a JSON line (as `sluice run` prints).
inline absl::StatusOr<std::vector<std::string>> JsonLines(const DatasetBase& dataset, int64_t limit = -1,
                                                          const IteratorContext& context = {}) {
  absl::StatusOr<std::vector<Element>> elements = CollectElements(dataset, context, limit);
  if (!elements.ok()) return elements.status();
  std::vector<std::string> lines;
  for (const Element& e : *elements) lines.push_back(ElementToJson(e));
  return lines;
}

// JSON lines of a YAML pipeline; fails the status on any error.
inline absl::StatusOr<std::vector<std::string>> RunYaml(const std::string& text, int64_t limit = -1) {
  absl::StatusOr<DatasetPtr> dataset = DatasetFromYaml(text);
  if (!dataset.ok()) return dataset.status();
  return JsonLines(**dataset, limit);
}

// Scalar int64 values of single-component elements.
inline std::vector<int64_t> Int64Values(const std::vector<Element>& elements) {
  std::vector<int64_t> values;
  for (const Element& e : elements) values.push_back(e.components.at(0).data<int64_t>()[0]);
  return values;
}

// A fresh empty directory under the system temp dir, removed on
// destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sluice_test_XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Catch2-asserting shorthands: each fails the current test (with the
// status in the report) instead of returning an error.

inline DatasetPtr MustBuild(const Dataset& dataset) {
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  INFO(built.status().ToString());
  REQUIRE(built.ok());
  return *built;
}

inline std::unique_ptr<IteratorBase> MustIterate(const DatasetPtr& dataset) {
  absl::StatusOr<std::unique_ptr<IteratorBase>> it = dataset->MakeIterator(IteratorContext{});
  INFO(it.status().ToString());
  REQUIRE(it.ok());
  return *std::move(it);
}

inline std::vector<std::string> JsonOf(const Dataset& dataset, int64_t limit = -1) {
  DatasetPtr built = MustBuild(dataset);
  absl::StatusOr<std::vector<std::string>> lines = JsonLines(*built, limit);
  INFO(lines.status().ToString());
  REQUIRE(lines.ok());
  return *lines;
}

inline std::vector<int64_t> IntsOf(const Dataset& dataset, int64_t limit = -1) {
  absl::StatusOr<std::vector<Element>> elements = dataset.Collect(limit);
  INFO(elements.status().ToString());
  REQUIRE(elements.ok());
  return Int64Values(*elements);
}

inline std::vector<std::string> Yaml(const std::string& text, int64_t limit = -1) {
  absl::StatusOr<std::vector<std::string>> lines = RunYaml(text, limit);
  INFO(lines.status().ToString());
  REQUIRE(lines.ok());
  return *lines;
}

// The error of a definition that must fail to build.
inline absl::Status BuildError(const Dataset& dataset) {
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  REQUIRE_FALSE(built.ok());
  return built.status();
}

inline void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  file.close();
  REQUIRE(file.good());
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_TEST_UTIL_H_
