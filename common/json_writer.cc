#include "common/json_writer.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace sluice {

JsonWriter& JsonWriter::End(char close) {
  out_->push_back(close);
  first_ = false;
  return *this;
}

JsonWriter& JsonWriter::String(const char* key, std::string_view value) {
  Key(key);
  AppendJsonString(value, out_);
  return *this;
}

JsonWriter& JsonWriter::Int(const char* key, int64_t value) {
  Key(key);
  absl::StrAppend(out_, value);
  return *this;
}

JsonWriter& JsonWriter::Double(const char* key, double value) {
  Key(key);
  char digits[32];
  auto [end, error] = std::to_chars(digits, digits + sizeof(digits), value);
  out_->append(digits, error == std::errc() ? end : digits);
  return *this;
}

JsonWriter& JsonWriter::Bool(const char* key, bool value) {
  Key(key);
  out_->append(value ? "true" : "false");
  return *this;
}

void JsonWriter::Key(const char* key) {
  if (!first_) out_->push_back(',');
  first_ = false;
  if (key != nullptr) {
    AppendJsonString(key, out_);
    out_->push_back(':');
  }
}

JsonWriter& JsonWriter::Open(const char* key, char open) {
  Key(key);
  out_->push_back(open);
  first_ = true;
  return *this;
}

}  // namespace sluice
