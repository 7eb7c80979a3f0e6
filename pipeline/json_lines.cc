#include "pipeline/json_lines.h"

#include <simdjson.h>

#include <cmath>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// A field's type: a dtype, and whether the value is a JSON array of them.
struct FieldType {
  DType dtype = DType::kString;
  bool vector = false;
};

constexpr const char* kTypes =
    "string, bool, int32, int64, float32, float64, or a numeric type with [] for an array";

absl::StatusOr<FieldType> ParseFieldType(const std::string& field, const std::string& name) {
  FieldType type;
  absl::string_view base = name;
  if (absl::EndsWith(base, "[]")) {
    type.vector = true;
    base.remove_suffix(2);
  }
  if (base == "string" && !type.vector) return type;
  if (base == "bool" && !type.vector) {
    type.dtype = DType::kBool;
    return type;
  }
  for (const DType numeric : {DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64}) {
    if (base == DTypeName(numeric)) {
      type.dtype = numeric;
      return type;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("json_lines: field '", field, "' has type '", name, "'; the types are ", kTypes));
}

std::vector<FieldType> FieldTypes(const std::vector<std::string>& fields,
                                  const std::vector<std::string>& types) {
  std::vector<FieldType> parsed(fields.size());
  for (size_t i = 0; i < types.size() && i < fields.size(); ++i) {
    absl::StatusOr<FieldType> type = ParseFieldType(fields[i], types[i]);
    if (type.ok()) parsed[i] = *type;
  }
  return parsed;
}

// What a JSON value is, for messages.
const char* KindOf(const simdjson::dom::element& value) {
  switch (value.type()) {
    case simdjson::dom::element_type::ARRAY:
      return "an array";
    case simdjson::dom::element_type::OBJECT:
      return "an object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
      return "an integer";
    case simdjson::dom::element_type::DOUBLE:
      return "a fraction";
    case simdjson::dom::element_type::STRING:
      return "a string";
    case simdjson::dom::element_type::BOOL:
      return "a bool";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

// One JSON number or bool as `dtype`, written at `out`; false (with *why)
// when it is of another kind or out of range.
bool ReadNumber(const simdjson::dom::element& value, DType dtype, void* out, std::string* why) {
  if (dtype == DType::kBool) {
    bool flag = false;
    if (value.get_bool().get(flag) != simdjson::SUCCESS) return (*why = KindOf(value), false);
    *static_cast<bool*>(out) = flag;
    return true;
  }
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64) {
    double number = 0;
    if (value.get_double().get(number) != simdjson::SUCCESS) return (*why = KindOf(value), false);
    if (dtype == DType::kFloat64) {
      *static_cast<double*>(out) = number;
    } else if (std::abs(number) > std::numeric_limits<float>::max()) {
      return (*why = absl::StrCat(simdjson::minify(value), ", past float32's range"), false);
    } else {
      *static_cast<float*>(out) = static_cast<float>(number);
    }
    return true;
  }
  int64_t number = 0;
  if (value.get_int64().get(number) != simdjson::SUCCESS) {
    const bool integral = value.type() == simdjson::dom::element_type::UINT64;
    return (*why = integral ? absl::StrCat(simdjson::minify(value), ", past int64's range") : KindOf(value),
            false);
  }
  if (dtype == DType::kInt64) {
    *static_cast<int64_t*>(out) = number;
    return true;
  }
  if (number < std::numeric_limits<int32_t>::min() || number > std::numeric_limits<int32_t>::max()) {
    return (*why = absl::StrCat(number, ", past int32's range"), false);
  }
  *static_cast<int32_t*>(out) = static_cast<int32_t>(number);
  return true;
}

}  // namespace

struct JsonLineParser::Impl {
  simdjson::dom::parser parser;
  std::vector<FieldType> types;
};

JsonLineParser::JsonLineParser(std::vector<std::string> fields, std::vector<std::string> types)
    : fields_(std::move(fields)), names_(MakeNames(fields_)), impl_(std::make_unique<Impl>()) {
  impl_->types = FieldTypes(fields_, types);
}

JsonLineParser::~JsonLineParser() = default;

absl::Status JsonLineParser::Parse(const std::string& line, const std::string& path, int64_t line_number,
                                   Element* element) {
  const std::string where = absl::StrCat("json_lines: '", path, "' line ", line_number, ": ");
  auto data_loss = [&](const std::string& what) { return absl::DataLossError(absl::StrCat(where, what)); };
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
  for (size_t i = 0; i < fields_.size(); ++i) {
    const std::string& field = fields_[i];
    const FieldType& type = impl_->types[i];
    simdjson::dom::element value;
    if (object.at_key(field).get(value)) return data_loss(absl::StrCat("no field '", field, "'"));
    if (type.dtype == DType::kString) {
      std::string_view text;
      if (value.get_string().get(text) == simdjson::SUCCESS) {
        components.push_back(Tensor::StringScalar(std::string(text)));
      } else {
        components.push_back(Tensor::StringScalar(simdjson::minify(value)));
      }
      continue;
    }
    const std::string type_name = absl::StrCat(DTypeName(type.dtype), type.vector ? "[]" : "");
    auto wrong = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "field '", field, "' is ", why, " where ", type_name, " is declared"));
    };
    std::string why;
    if (!type.vector) {
      Tensor scalar(type.dtype, {});
      if (!ReadNumber(value, type.dtype, scalar.mutable_raw_data(), &why)) return wrong(why);
      components.push_back(std::move(scalar));
      continue;
    }
    simdjson::dom::array array;
    if (value.get_array().get(array) != simdjson::SUCCESS) return wrong(KindOf(value));
    Tensor vector(type.dtype, {static_cast<int64_t>(array.size())});
    auto* out = static_cast<char*>(vector.mutable_raw_data());
    int64_t index = 0;
    for (const simdjson::dom::element item : array) {
      if (!ReadNumber(item, type.dtype, out + index * DTypeSize(type.dtype), &why)) {
        return wrong(absl::StrCat("an array whose item ", index, " is ", why));
      }
      ++index;
    }
    components.push_back(std::move(vector));
  }
  *element = Element(std::move(components), names_);
  return absl::OkStatus();
}

ElementSpec JsonLinesSpec(const std::vector<std::string>& fields, const std::vector<std::string>& types) {
  const std::vector<FieldType> parsed = FieldTypes(fields, types);
  ElementSpec spec;
  for (const FieldType& type : parsed) {
    spec.components.push_back(
        {type.vector ? PartialShape{{kUnknownDim}, false} : PartialShape::Known({}), type.dtype});
  }
  spec.names = fields;
  return spec;
}

absl::Status CheckJsonFields(const std::vector<std::string>& fields, const std::vector<std::string>& types) {
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
  if (types.empty()) return absl::OkStatus();
  if (types.size() != fields.size()) {
    return absl::InvalidArgumentError(absl::StrCat("json_lines: ", types.size(), " field_types for ",
                                                   fields.size(), " fields; give one type per field"));
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    if (absl::StatusOr<FieldType> type = ParseFieldType(fields[i], types[i]); !type.ok())
      return type.status();
  }
  return absl::OkStatus();
}

}  // namespace sluice
