// Helpers shared by the unit tests: building datasets from YAML text or a
// builder, and turning elements into compact comparable values.
#ifndef SLUICE_TESTS_TESTING_TEST_UTIL_H_
#define SLUICE_TESTS_TESTING_TEST_UTIL_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/element.h"
#include "common/json.h"
#include "pipeline/builder.h"
#include "pipeline/dataset.h"
#include "pipeline/yaml_loader.h"

namespace sluice::testing {

// Parses YAML pipeline text (source name "test.yaml") and builds it.
inline absl::StatusOr<DatasetPtr> DatasetFromYaml(const std::string& text) {
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(text, "test.yaml");
  if (!loaded.ok()) return loaded.status();
  return BuildDataset(loaded->def);
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

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_TEST_UTIL_H_
