#include "config/config_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "pipeline/yaml_document.h"

namespace sluice {

std::string ConfigSchema::FlagName(const std::string& key) {
  return "--" + absl::StrReplaceAll(key, {{"_", "-"}, {".", "-"}});
}

void ConfigSchema::AddInt(const std::string& key, int64_t* value, int64_t min, int64_t max,
                          const std::string& help) {
  Entry entry{key, "integer", help};
  entry.int_value = value;
  entry.min = min;
  entry.max = max;
  entries_.push_back(entry);
}

void ConfigSchema::AddString(const std::string& key, std::string* value, const std::string& help,
                             StringCheck check) {
  Entry entry{key, "string", help};
  entry.string_value = value;
  entry.check = std::move(check);
  entries_.push_back(entry);
}

void ConfigSchema::AddBool(const std::string& key, bool* value, const std::string& help) {
  Entry entry{key, "boolean", help};
  entry.bool_value = value;
  entries_.push_back(entry);
}

void ConfigSchema::AddStringList(const std::string& key, std::vector<std::string>* values,
                                 const std::string& help) {
  Entry entry{key, "list of strings", help};
  entry.list_value = values;
  entries_.push_back(entry);
}

void ConfigSchema::AddRecordList(const std::string& key, std::vector<std::string> fields,
                                 std::vector<Record>* values, const std::string& help,
                                 std::vector<std::string> optional, std::vector<std::string> lists) {
  Entry entry{key, absl::StrCat("list of {", absl::StrJoin(fields, ", "), "}"), help};
  entry.record_value = values;
  entry.fields = std::move(fields);
  entry.optional_fields = std::move(optional);
  entry.list_fields = std::move(lists);
  entries_.push_back(entry);
}

std::vector<std::string> ConfigSchema::RecordItems(const std::string& value) {
  if (value.empty()) return {};
  return absl::StrSplit(value, ';');
}

namespace {

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The required fields `record` lacks, in `fields`' order.
std::vector<std::string> Missing(const std::vector<std::string>& fields,
                                 const std::vector<std::string>& optional,
                                 const ConfigSchema::Record& record) {
  std::vector<std::string> missing;
  for (const std::string& name : fields) {
    if (!record.contains(name) && !Contains(optional, name)) missing.push_back(name);
  }
  return missing;
}

}  // namespace

absl::StatusOr<ConfigSchema::Record> ConfigSchema::ParseRecordFlag(const Entry& entry,
                                                                   const std::string& text) {
  Record record;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const size_t equals = part.find('=');
    const std::string field(part.substr(0, equals));
    if (equals == absl::string_view::npos ||
        std::find(entry.fields.begin(), entry.fields.end(), field) == entry.fields.end() ||
        record.contains(field)) {
      return absl::InvalidArgumentError(absl::StrCat(FlagName(entry.key), " '", text, "': expected ",
                                                     absl::StrJoin(entry.fields, "=...,"), "=..."));
    }
    record[field] = std::string(part.substr(equals + 1));
  }
  if (!Missing(entry.fields, entry.optional_fields, record).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(FlagName(entry.key), " '", text, "': expected ",
                                                   absl::StrJoin(entry.fields, "=...,"), "=..."));
  }
  return record;
}

absl::Status ConfigSchema::LoadYamlFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("cannot read config file '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<YAML::Node> loaded = LoadYamlDocument(text.str(), path);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node& root = *loaded;
  if (root.IsNull()) return absl::OkStatus();  // an empty file sets nothing
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", root.Mark().line + 1, ":",
                                                   root.Mark().column + 1, ": a ", name_,
                                                   " config is a map of settings"));
  }
  return LoadMap(root, "", path);
}

absl::Status ConfigSchema::LoadMap(const YAML::Node& map, const std::string& prefix,
                                   const std::string& path) {
  auto error = [&](const YAML::Node& node, const std::string& message) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", node.Mark().line + 1, ":", node.Mark().column + 1, ": ", message));
  };
  std::vector<std::string> keys;
  for (const Entry& e : entries_) keys.push_back(e.key);
  for (const auto& item : map) {
    const std::string key = prefix + item.first.Scalar();
    const YAML::Node& value = item.second;
    auto entry = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
    if (entry == entries_.end()) {
      // A section ("auth:", "tls:") holds the settings named "section.key".
      const bool is_section = std::any_of(entries_.begin(), entries_.end(),
                                          [&](const Entry& e) { return e.key.starts_with(key + "."); });
      if (is_section && value.IsMap()) {
        if (absl::Status status = LoadMap(value, key + ".", path); !status.ok()) return status;
        continue;
      }
      if (is_section) return error(value, absl::StrCat("'", key, "' is a section: a map of settings"));
      return error(item.first,
                   absl::StrCat("unknown ", name_, " setting '", key, "'", DidYouMean(key, keys)));
    }
    if (entry->int_value != nullptr) {
      int64_t v = 0;
      if (!value.IsScalar() || !absl::SimpleAtoi(value.Scalar(), &v)) {
        // Digits that do not fit in 64 bits are a number out of range.
        const bool digits = value.IsScalar() && std::regex_match(value.Scalar(), std::regex("[-+]?[0-9]+"));
        return error(value, digits ? absl::StrCat("'", key, "' must be in [", entry->min, ", ", entry->max,
                                                  "], got ", value.Scalar())
                                   : absl::StrCat("'", key, "' must be an integer"));
      }
      if (v < entry->min || v > entry->max) {
        return error(value,
                     absl::StrCat("'", key, "' must be in [", entry->min, ", ", entry->max, "], got ", v));
      }
      *entry->int_value = v;
    } else if (entry->bool_value != nullptr) {
      const std::string text = value.IsScalar() ? value.Scalar() : "";
      if (text == "true") {
        *entry->bool_value = true;
      } else if (text == "false") {
        *entry->bool_value = false;
      } else {
        return error(value, absl::StrCat("'", key, "' must be true or false"));
      }
    } else if (entry->string_value != nullptr) {
      if (!value.IsScalar()) return error(value, absl::StrCat("'", key, "' must be a string"));
      if (entry->check) {
        if (absl::Status s = entry->check(value.Scalar()); !s.ok()) {
          return error(value, absl::StrCat("'", key, "': ", s.message()));
        }
      }
      *entry->string_value = value.Scalar();
    } else if (entry->record_value != nullptr) {
      const std::string expected =
          absl::StrCat("'", key, "' must be a list of maps of ", absl::StrJoin(entry->fields, ", "));
      entry->record_value->clear();
      if (!value.IsSequence() && !value.IsNull()) return error(value, expected);
      for (const auto& item : value) {
        if (!item.IsMap()) return error(item, expected);
        Record record;
        for (const auto& field : item) {
          const std::string name = field.first.Scalar();
          if (std::find(entry->fields.begin(), entry->fields.end(), name) == entry->fields.end()) {
            return error(field.first, absl::StrCat("unknown field '", name, "' in '", key,
                                                   "' (fields: ", absl::StrJoin(entry->fields, ", "), ")"));
          }
          if (Contains(entry->list_fields, name) && (field.second.IsSequence() || field.second.IsNull())) {
            std::vector<std::string> items;
            for (const auto& one : field.second) {
              if (!one.IsScalar() || one.Scalar().empty() || absl::StrContains(one.Scalar(), ';')) {
                return error(one,
                             absl::StrCat("'", key, "': '", name,
                                          "' must be a list of strings, each non-empty and without ';'"));
              }
              items.push_back(one.Scalar());
            }
            record[name] = absl::StrJoin(items, ";");
            continue;
          }
          if (!field.second.IsScalar()) {
            return error(field.second, absl::StrCat("'", key, "': '", name, "' must be a string"));
          }
          record[name] = field.second.Scalar();
        }
        if (const std::vector<std::string> missing = Missing(entry->fields, entry->optional_fields, record);
            !missing.empty()) {
          return error(item, absl::StrCat("'", key, "': an entry lacks '", missing.front(), "'"));
        }
        entry->record_value->push_back(std::move(record));
      }
    } else {
      entry->list_value->clear();
      if (value.IsScalar()) {
        entry->list_value->push_back(value.Scalar());
      } else if (value.IsSequence()) {
        for (const auto& v : value) {
          if (!v.IsScalar()) return error(v, absl::StrCat("'", key, "' must be a list of strings"));
          entry->list_value->push_back(v.Scalar());
        }
      } else if (!value.IsNull()) {
        return error(value, absl::StrCat("'", key, "' must be a list of strings"));
      }
    }
  }
  return absl::OkStatus();
}

void ConfigSchema::AddFlags(CLI::App& app) {
  for (Entry& e : entries_) {
    const std::string flag = FlagName(e.key);
    if (e.int_value != nullptr) {
      app.add_option(flag, *e.int_value, e.help)->capture_default_str();
    } else if (e.bool_value != nullptr) {
      app.add_flag(flag, *e.bool_value, e.help);
    } else if (e.string_value != nullptr) {
      app.add_option(flag, *e.string_value, e.help)->capture_default_str();
    } else if (e.record_value != nullptr) {
      app.add_option_function<std::vector<std::string>>(
             flag,
             [&e](const std::vector<std::string>& texts) {
               e.record_value->clear();
               for (const std::string& text : texts) {
                 absl::StatusOr<Record> record = ParseRecordFlag(e, text);
                 if (!record.ok()) throw CLI::ValidationError(std::string(record.status().message()));
                 e.record_value->push_back(*std::move(record));
               }
             },
             absl::StrCat(e.help, " (repeatable: ", absl::StrJoin(e.fields, "=...,"), "=...)"))
          ->type_name("TEXT");
    } else {
      app.add_option(flag, *e.list_value, e.help + " (repeatable)");
    }
  }
}

absl::Status ConfigSchema::Validate() const {
  for (const Entry& e : entries_) {
    if (e.int_value != nullptr && (*e.int_value < e.min || *e.int_value > e.max)) {
      return absl::InvalidArgumentError(
          absl::StrCat(FlagName(e.key), " must be in [", e.min, ", ", e.max, "], got ", *e.int_value));
    }
    if (e.check && !e.string_value->empty()) {
      if (absl::Status s = e.check(*e.string_value); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(FlagName(e.key), ": ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ConfigSchema::Describe() const {
  std::vector<std::string> lines;
  for (const Entry& e : entries_) lines.push_back(absl::StrCat(e.key, ": ", e.type, " (", e.help, ")"));
  return lines;
}

}  // namespace sluice
