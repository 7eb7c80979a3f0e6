// ConfigSchema: typed settings read from a YAML file and overridden by
// command-line flags, for dispatcherd and workerd.
//
//   ConfigSchema schema("dispatcher");
//   schema.AddInt("port", &config.port, 0, 65535, "port to listen on; 0 picks a free one");
//   absl::Status status = schema.LoadYamlFile("dispatcher.yaml");
//   schema.AddFlags(app);  // CLI11: --port, ... override the file
//
// An unknown or repeated key, a wrong type or an out-of-range value is
// InvalidArgument naming the file, line, column and key (and the closest
// valid key).
#ifndef SLUICE_CONFIG_CONFIG_SCHEMA_H_
#define SLUICE_CONFIG_CONFIG_SCHEMA_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace CLI {
class App;
}  // namespace CLI
namespace YAML {
class Node;
}  // namespace YAML

namespace sluice {

class ConfigSchema {
 public:
  explicit ConfigSchema(std::string name) : name_(std::move(name)) {}

  void AddInt(const std::string& key, int64_t* value, int64_t min, int64_t max, const std::string& help);
  // `check`, when given, judges the value both from the file (the error then
  // names file:line:column and the key) and from the flag (naming the flag).
  using StringCheck = std::function<absl::Status(const std::string& value)>;
  void AddString(const std::string& key, std::string* value, const std::string& help,
                 StringCheck check = nullptr);
  void AddStringList(const std::string& key, std::vector<std::string>* values, const std::string& help);
  // A list of records, each a map of `fields` (strings) in the file
  // ("clients: [{name: a, token_file: /x}]"), and on the command line a
  // repeatable --flag "field=value,field=value". Every field is required
  // but the `optional` ones. A list field (in `lists`) takes a list in the
  // file and "a;b" on the command line; its record value is the items
  // joined by ';' (RecordItems splits it).
  using Record = std::map<std::string, std::string>;
  void AddRecordList(const std::string& key, std::vector<std::string> fields, std::vector<Record>* values,
                     const std::string& help, std::vector<std::string> optional = {},
                     std::vector<std::string> lists = {});
  // The items of a list field's value: "a;b" -> {"a", "b"}; "" -> {}.
  static std::vector<std::string> RecordItems(const std::string& value);
  // true/false in the file; a bare --flag on the command line.
  void AddBool(const std::string& key, bool* value, const std::string& help);
  // A key "section.name" is `name` in the map under `section:` in the file
  // and --section-name on the command line.

  // Reads the settings in a YAML map file.
  absl::Status LoadYamlFile(const std::string& path);
  // "--tls-cert-file" for "tls.cert_file".
  static std::string FlagName(const std::string& key);
  // Adds one --flag per setting (dashes for underscores), overriding the
  // file when given.
  void AddFlags(CLI::App& app);
  // Range checks after flags were applied; errors name the flag.
  absl::Status Validate() const;
  // One line per key: "key: type (help)", for docs and --help.
  std::vector<std::string> Describe() const;

 private:
  struct Entry {
    std::string key;
    std::string type;
    std::string help;
    int64_t* int_value = nullptr;
    int64_t min = 0;
    int64_t max = 0;
    std::string* string_value = nullptr;
    StringCheck check;
    std::vector<std::string>* list_value = nullptr;
    bool* bool_value = nullptr;
    std::vector<Record>* record_value = nullptr;
    std::vector<std::string> fields;
    std::vector<std::string> optional_fields;
    std::vector<std::string> list_fields;
  };
  // One record of `entry` from a flag's "field=value,..." text.
  static absl::StatusOr<Record> ParseRecordFlag(const Entry& entry, const std::string& text);

  absl::Status LoadMap(const YAML::Node& map, const std::string& prefix, const std::string& path);

  const std::string name_;
  std::vector<Entry> entries_;
};

}  // namespace sluice

#endif  // SLUICE_CONFIG_CONFIG_SCHEMA_H_
