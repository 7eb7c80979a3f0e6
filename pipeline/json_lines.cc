#include "pipeline/json_lines.h"

#include <simdjson.h>

#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {

struct JsonLineParser::Impl {
  simdjson::dom::parser parser;
};

JsonLineParser::JsonLineParser(std::vector<std::string> fields)
    : fields_(std::move(fields)), names_(MakeNames(fields_)), impl_(std::make_unique<Impl>()) {}

JsonLineParser::~JsonLineParser() = default;

absl::Status JsonLineParser::Parse(const std::string& line, const std::string& path, int64_t line_number,
                                   Element* element) {
  auto data_loss = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("json_lines: '", path, "' line ", line_number, ": ", what));
  };
  simdjson::dom::element document;
  // realloc_if_needed: the line has no padding of its own, so simdjson
  // copies it into its padded buffer.
  if (auto error = impl_->parser.parse(line.data(), line.size(), true).get(document); error) {
    return data_loss(absl::StrCat("not valid JSON (", simdjson::error_message(error), ")"));
  }
  simdjson::dom::object object;
  if (document.get_object().get(object)) return data_loss("not a JSON object");
  std::vector<Tensor> components;
  components.reserve(fields_.size());
  for (const std::string& field : fields_) {
    simdjson::dom::element value;
    if (object.at_key(field).get(value)) return data_loss(absl::StrCat("no field '", field, "'"));
    std::string_view text;
    if (value.get_string().get(text) == simdjson::SUCCESS) {
      components.push_back(Tensor::StringScalar(std::string(text)));
    } else {
      components.push_back(Tensor::StringScalar(simdjson::minify(value)));
    }
  }
  *element = Element(std::move(components), names_);
  return absl::OkStatus();
}

ElementSpec JsonLinesSpec(const std::vector<std::string>& fields) {
  ElementSpec spec;
  for (size_t i = 0; i < fields.size(); ++i) {
    spec.components.push_back({PartialShape::Known({}), DType::kString});
  }
  spec.names = fields;
  return spec;
}

absl::Status CheckJsonFields(const std::vector<std::string>& fields) {
  if (fields.empty()) {
    return absl::InvalidArgumentError(
        "json_lines: missing 'fields' (the JSON fields to read, one per component)");
  }
  std::set<std::string> seen;
  for (const std::string& field : fields) {
    if (field.empty()) return absl::InvalidArgumentError("json_lines: a field name is empty");
    if (!seen.insert(field).second) {
      return absl::InvalidArgumentError(absl::StrCat("json_lines: field '", field, "' is named twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
