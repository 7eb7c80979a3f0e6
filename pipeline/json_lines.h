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

// The element of one line: a component per field in `fields`, named after
// it, of the field's type in `types` (one per field; none: all strings).
// A "string" field holding a JSON string gives its text, and any other
// value (number, bool, null, array, object) its JSON, minified. A numeric
// type ("int32", "int64", "float32", "float64") or "bool" takes a JSON
// value of that kind as a scalar; with "[]" ("int32[]") a JSON array of
// them as a vector. A line that is not a JSON object, or lacks a field, is
// DataLoss naming `path`, the 1-based `line_number` and what is wrong
// (ignore_errors drops it); a value of the wrong kind, or out of its
// type's range, is InvalidArgument naming the file, line and field.
class JsonLineParser {
 public:
  JsonLineParser(std::vector<std::string> fields, std::vector<std::string> types = {});
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

// json_lines' spec: a component per field, named after it: a string scalar,
// or a scalar or vector (unknown length) of the field's type.
ElementSpec JsonLinesSpec(const std::vector<std::string>& fields, const std::vector<std::string>& types = {});
// InvalidArgument unless `fields` is non-empty with distinct, non-empty
// names, and `types` is empty or one known type per field.
absl::Status CheckJsonFields(const std::vector<std::string>& fields,
                             const std::vector<std::string>& types = {});

}  // namespace sluice

#endif  // SLUICE_PIPELINE_JSON_LINES_H_
