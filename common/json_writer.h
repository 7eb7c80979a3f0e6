// JsonWriter: writes one JSON object or array into a string, commas
// included, for status pages (the dispatcher's /status.json).
//
//   std::string out;
//   JsonWriter json(&out);
//   json.BeginObject().Int("now_ms", now).BeginArray("tags").String(nullptr, "gpu").End(']').End('}');
//
// Each value inside an object takes its key; inside an array the key is
// nullptr. Integers are written exactly (milliseconds since the epoch do
// not fit in the six digits absl::StrAppend gives a double); doubles in
// their shortest exact form.
#ifndef SLUICE_COMMON_JSON_WRITER_H_
#define SLUICE_COMMON_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter& BeginObject(const char* key = nullptr) { return Open(key, '{'); }
  JsonWriter& BeginArray(const char* key = nullptr) { return Open(key, '['); }
  // `close`: '}' or ']', matching the Begin.
  JsonWriter& End(char close);
  JsonWriter& String(const char* key, std::string_view value);
  JsonWriter& Int(const char* key, int64_t value);
  JsonWriter& Double(const char* key, double value);
  JsonWriter& Bool(const char* key, bool value);

 private:
  // A member's key (in an object), or nothing (in an array); the comma
  // before every member but the first.
  void Key(const char* key);
  JsonWriter& Open(const char* key, char open);

  std::string* const out_;
  bool first_ = true;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_JSON_WRITER_H_
