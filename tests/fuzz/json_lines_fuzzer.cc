// json_lines' line parser (pipeline/json_lines.h) on any text, line by
// line: an element of the named fields, or DataLoss naming the line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeline/json_lines.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sluice::JsonLineParser* parser = new sluice::JsonLineParser({"text", "id", "meta"});
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  int64_t line_number = 0;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string line(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    sluice::Element element;
    (void)parser->Parse(line, "fuzz.jsonl", ++line_number, &element);
  }
  return 0;
}
