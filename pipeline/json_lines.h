// json_lines: the record reader behind the file source of that name turns
// each line into one element. Parsing is simdjson's (docs/design.md says
// why): one parser per iterator, reused for every line.
#ifndef SLUICE_PIPELINE_JSON_LINES_H_
#define SLUICE_PIPELINE_JSON_LINES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/dataset.h"

namespace sluice {

// The element of one line: a string scalar per field in `fields`, named
// after it. A field holding a JSON string gives its text; any other value
// (number, bool, null, array, object) gives its JSON, minified. A line that
// is not a JSON object, or lacks a field, is DataLoss naming `path`, the
// 1-based `line_number` and what is wrong (ignore_errors drops it).
class JsonLineParser {
 public:
  explicit JsonLineParser(std::vector<std::string> fields);
  ~JsonLineParser();
  JsonLineParser(const JsonLineParser&) = delete;
  JsonLineParser& operator=(const JsonLineParser&) = delete;

  absl::Status Parse(const std::string& line, const std::string& path, int64_t line_number, Element* element);

 private:
  struct Impl;
  const std::vector<std::string> fields_;
  const ComponentNames names_;
  std::unique_ptr<Impl> impl_;
};

// json_lines' spec: one string scalar per field, named after it.
ElementSpec JsonLinesSpec(const std::vector<std::string>& fields);
// InvalidArgument unless `fields` is non-empty with distinct, non-empty names.
absl::Status CheckJsonFields(const std::vector<std::string>& fields);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_JSON_LINES_H_
