#include "pipeline/yaml_keys.h"

#include <cctype>
#include <map>

#include "absl/strings/str_cat.h"

namespace sluice {

std::string YamlLocation(const YAML::Mark& mark, const std::string& source) {
  if (mark.line < 0) return source;
  return absl::StrCat(source, ":", mark.line + 1, ":", mark.column + 1);
}

std::string YamlLocation(const YAML::Node& node, const std::string& source) {
  return YamlLocation(node.Mark(), source);
}

bool LooksNumeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' ||
                        s[0] == '.' || s == "inf" || s == "nan");
}

absl::Status CheckUniqueKeys(const YAML::Node& node, const std::string& source) {
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (absl::Status status = CheckUniqueKeys(item, source); !status.ok()) return status;
    }
  } else if (node.IsMap()) {
    std::map<std::string, int> first_line;
    for (const auto& item : node) {
      const YAML::Mark mark = item.first.Mark();
      if (item.first.IsScalar()) {
        auto [first, inserted] = first_line.emplace(item.first.Scalar(), mark.line + 1);
        if (!inserted) {
          return absl::InvalidArgumentError(
              absl::StrCat(YamlLocation(mark, source), ": '", item.first.Scalar(),
                           "' is set twice (first at line ", first->second, "); a key may appear once"));
        }
      }
      if (absl::Status status = CheckUniqueKeys(item.second, source); !status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
