// The YAML pipeline loader (pipeline/yaml_loader.h) on any text: a pipeline
// definition or an InvalidArgument naming the place, never an exception or
// a crash. Not built (validate = false): building may read files the text
// names. Text that names plugins is skipped: loading one runs its code.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipeline/yaml_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text.find("plugin") != std::string_view::npos) return 0;
  sluice::YamlLoadOptions options;
  options.validate = false;
  (void)sluice::ParsePipelineYaml(text, "fuzz.yaml", "/nonexistent", options);
  return 0;
}
