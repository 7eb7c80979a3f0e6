#include "config/config_schema.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/testing/config_args.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using testing::TempDir;
using testing::WriteFile;

int Parse(const std::vector<std::string>& args, ConfigSchema& schema) {
  return testing::ParseArgs(args, schema);
}

// A small schema of every kind of setting.
struct Settings {
  int64_t port = 5000;
  int64_t workers = 4;
  std::string bind_address = "0.0.0.0";
  std::vector<std::string> tags = {"default"};
};

ConfigSchema MakeSchema(Settings* s) {
  ConfigSchema schema("dispatcher");
  schema.AddInt("port", &s->port, 0, 65535, "port to listen on");
  schema.AddInt("num_workers", &s->workers, 1, 64, "workers");
  schema.AddString("bind_address", &s->bind_address, "address to listen on");
  schema.AddStringList("tags", &s->tags, "worker tags");
  return schema;
}

// Writes `text` to a file in `dir` and loads it into a fresh schema over `s`.
absl::Status Load(const TempDir& dir, const std::string& text, Settings* s, std::string* path = nullptr) {
  const std::string file = dir.File("config.yaml");
  WriteFile(file, text);
  if (path != nullptr) *path = file;
  ConfigSchema schema = MakeSchema(s);
  return schema.LoadYamlFile(file);
}

TEST_CASE("config: integers, strings and lists load from YAML", "[config]") {
  TempDir dir;
  Settings s;
  absl::Status status = Load(dir,
                             "# a comment\n"
                             "port: 7000\n"
                             "bind_address: \"127.0.0.1\"\n"
                             "tags: [a, b, c]\n",
                             &s);
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(s.port == 7000);
  CHECK(s.bind_address == "127.0.0.1");
  CHECK(s.tags == std::vector<std::string>{"a", "b", "c"});
  // Keys not in the file keep their values.
  CHECK(s.workers == 4);
}

TEST_CASE("config: list forms", "[config]") {
  TempDir dir;
  SECTION("a block sequence") {
    Settings s;
    REQUIRE(Load(dir, "tags:\n  - x\n  - y\n", &s).ok());
    CHECK(s.tags == std::vector<std::string>{"x", "y"});
  }
  SECTION("one scalar is a list of one") {
    Settings s;
    REQUIRE(Load(dir, "tags: only\n", &s).ok());
    CHECK(s.tags == std::vector<std::string>{"only"});
  }
  SECTION("an empty value or an empty list clears it") {
    Settings s;
    REQUIRE(Load(dir, "tags:\n", &s).ok());
    CHECK(s.tags.empty());
    Settings t;
    REQUIRE(Load(dir, "tags: []\n", &t).ok());
    CHECK(t.tags.empty());
  }
  SECTION("numbers in a list are strings") {
    Settings s;
    REQUIRE(Load(dir, "tags: [1, 2.5, yes]\n", &s).ok());
    CHECK(s.tags == std::vector<std::string>{"1", "2.5", "yes"});
  }
}

TEST_CASE("config: integer bounds are inclusive", "[config]") {
  TempDir dir;
  Settings s;
  REQUIRE(Load(dir, "port: 0\nnum_workers: 64\n", &s).ok());
  CHECK(s.port == 0);
  CHECK(s.workers == 64);
  REQUIRE(Load(dir, "port: 65535\nnum_workers: 1\n", &s).ok());
  CHECK(s.port == 65535);
  CHECK(s.workers == 1);
}

TEST_CASE("config: a number is a fine string", "[config]") {
  TempDir dir;
  Settings s;
  REQUIRE(Load(dir, "bind_address: 10\n", &s).ok());
  CHECK(s.bind_address == "10");
}

TEST_CASE("config: an unknown key names the file, line, column and the closest key", "[config]") {
  TempDir dir;
  Settings s;
  std::string path;
  absl::Status status = Load(dir, "port: 7000\nprot: 7001\n", &s, &path);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(status.message()) ==
        path + ":2:1: unknown dispatcher setting 'prot'; did you mean 'port'?");

  absl::Status indented = Load(dir, "{port: 1,  bind_adress: x}\n", &s, &path);
  CHECK(indented.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(indented.message()) ==
        path + ":1:12: unknown dispatcher setting 'bind_adress'; did you mean 'bind_address'?");

  absl::Status far = Load(dir, "compression: gzip\n", &s, &path);
  CHECK(far.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(far.message()) == path + ":1:1: unknown dispatcher setting 'compression'");
}

TEST_CASE("config: the schema's name is in the message", "[config]") {
  TempDir dir;
  const std::string path = dir.File("worker.yaml");
  WriteFile(path, "prot: 1\n");
  int64_t port = 0;
  ConfigSchema schema("worker");
  schema.AddInt("port", &port, 0, 65535, "port");
  absl::Status status = schema.LoadYamlFile(path);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(status.message()) == path + ":1:1: unknown worker setting 'prot'; did you mean 'port'?");
}

TEST_CASE("config: a value of the wrong type", "[config]") {
  TempDir dir;
  Settings s;
  std::string path;

  absl::Status word = Load(dir, "port: abc\n", &s, &path);
  CHECK(word.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(word.message()) == path + ":1:7: 'port' must be an integer");

  absl::Status fraction = Load(dir, "\n\nport: 1.5\n", &s, &path);
  CHECK(fraction.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(fraction.message()) == path + ":3:7: 'port' must be an integer");

  absl::Status list = Load(dir, "port: [1, 2]\n", &s, &path);
  CHECK(list.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(list.message()) == path + ":1:7: 'port' must be an integer");

  absl::Status map = Load(dir, "bind_address: {a: 1}\n", &s, &path);
  CHECK(map.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(map.message()) == path + ":1:15: 'bind_address' must be a string");

  absl::Status tags = Load(dir, "tags: {a: 1}\n", &s, &path);
  CHECK(tags.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(tags.message()) == path + ":1:7: 'tags' must be a list of strings");

  absl::Status nested = Load(dir, "tags: [a, [b]]\n", &s, &path);
  CHECK(nested.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(nested.message()) == path + ":1:11: 'tags' must be a list of strings");
}

TEST_CASE("config: an integer out of range", "[config]") {
  TempDir dir;
  Settings s;
  std::string path;
  absl::Status high = Load(dir, "port: 70000\n", &s, &path);
  CHECK(high.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(high.message()) == path + ":1:7: 'port' must be in [0, 65535], got 70000");
  CHECK(s.port == 5000);

  absl::Status low = Load(dir, "num_workers: 0\n", &s, &path);
  CHECK(low.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(low.message()) == path + ":1:14: 'num_workers' must be in [1, 64], got 0");

  absl::Status negative = Load(dir, "port: -1\n", &s, &path);
  CHECK(negative.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(negative.message()) == path + ":1:7: 'port' must be in [0, 65535], got -1");

  // Past int64: still a number out of range, not "not an integer".
  absl::Status huge = Load(dir, "port: 99999999999999999999\n", &s, &path);
  CHECK(huge.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(huge.message()) == path + ":1:7: 'port' must be in [0, 65535], got 99999999999999999999");
  absl::Status word = Load(dir, "port: many\n", &s, &path);
  CHECK(std::string(word.message()) == path + ":1:7: 'port' must be an integer");
}

TEST_CASE("config: a key set twice names both lines", "[config][hardening]") {
  TempDir dir;
  Settings s;
  std::string path;
  absl::Status twice = Load(dir, "port: 7000\nnum_workers: 2\nport: 7001\n", &s, &path);
  CHECK(twice.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(twice.message()) ==
        path + ":3:1: 'port' is set twice (first at line 1); a key may appear once");
}

// A string setting with a check, as log_level and advertised_address have.
absl::Status CheckColour(const std::string& value) {
  if (value == "red" || value == "blue") return absl::OkStatus();
  return absl::InvalidArgumentError("unknown colour '" + value + "' (valid: red, blue)");
}

TEST_CASE("config: a string's check names the file and line, or the flag", "[config][hardening]") {
  TempDir dir;
  std::string colour = "red";
  ConfigSchema schema("dispatcher");
  schema.AddString("colour", &colour, "a colour", CheckColour);
  const std::string path = dir.File("config.yaml");
  WriteFile(path, "\ncolour: green\n");
  absl::Status file = schema.LoadYamlFile(path);
  CHECK(file.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(file.message()) == path + ":2:9: 'colour': unknown colour 'green' (valid: red, blue)");
  CHECK(colour == "red");
  WriteFile(path, "colour: blue\n");
  CHECK(schema.LoadYamlFile(path).ok());
  CHECK(colour == "blue");
  colour = "green";  // as a flag sets it
  CHECK(schema.Validate().message() == "--colour: unknown colour 'green' (valid: red, blue)");
}

TEST_CASE("config: invalid YAML names the place", "[config]") {
  TempDir dir;
  Settings s;
  std::string path;
  absl::Status status = Load(dir, "port: 7000\ntags: [a, b\n", &s, &path);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), StartsWith(path + ":"));
  CHECK_THAT(std::string(status.message()), Contains(": invalid YAML: "));

  absl::Status tab = Load(dir, "port: 1\n  bad: : :\n", &s, &path);
  CHECK(tab.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(tab.message()), StartsWith(path + ":2:"));
  CHECK_THAT(std::string(tab.message()), Contains(": invalid YAML: "));
}

TEST_CASE("config: a file that is not a map", "[config]") {
  TempDir dir;
  Settings s;
  std::string path;
  absl::Status list = Load(dir, "- port\n- 7000\n", &s, &path);
  CHECK(list.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(list.message()) == path + ":1:1: a dispatcher config is a map of settings");

  absl::Status scalar = Load(dir, "\n  port\n", &s, &path);
  CHECK(scalar.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(scalar.message()) == path + ":2:3: a dispatcher config is a map of settings");
}

TEST_CASE("config: an alias that loops is refused with its place, aliases that do not load", "[config]") {
  TempDir dir;
  Settings s;
  std::string path;
  absl::Status loop = Load(dir, "port: 7000\ntags: &t [a, *t]\n", &s, &path);
  CHECK(loop.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(loop.message()) ==
        path + ":2:14: the alias *t is inside the node '&t' names (" + path +
            ":2:7), so that node would hold itself: a YAML alias may not loop");
  CHECK(s.port == 5000);  // nothing was set

  // An aliased value is the anchored node: its errors name where it is written.
  CHECK(Load(dir, "port: &p 7001\nnum_workers: *p\ntags: [*p]\n", &s).message() ==
        path + ":1:7: 'num_workers' must be in [1, 64], got 7001");
  CHECK(Load(dir, "port: &p 7001\ntags: [*p]\n", &s).ok());
  CHECK(s.port == 7001);
  CHECK(s.tags == std::vector<std::string>{"7001"});
}

TEST_CASE("config: an empty file sets nothing", "[config]") {
  TempDir dir;
  Settings s;
  CHECK(Load(dir, "", &s).ok());
  CHECK(Load(dir, "# only a comment\n\n", &s).ok());
  CHECK(Load(dir, "---\n", &s).ok());
  CHECK(s.port == 5000);
  CHECK(s.workers == 4);
  CHECK(s.bind_address == "0.0.0.0");
  CHECK(s.tags == std::vector<std::string>{"default"});
}

TEST_CASE("config: a missing file", "[config]") {
  TempDir dir;
  Settings s;
  ConfigSchema schema = MakeSchema(&s);
  const std::string path = dir.File("absent.yaml");
  absl::Status status = schema.LoadYamlFile(path);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(status.message()) == "cannot read config file '" + path + "'");
}

TEST_CASE("config: Validate names the flag", "[config]") {
  Settings s;
  ConfigSchema schema = MakeSchema(&s);
  CHECK(schema.Validate().ok());
  s.port = 70000;
  absl::Status port = schema.Validate();
  CHECK(port.code() == absl::StatusCode::kInvalidArgument);
  CHECK(port.message() == "--port must be in [0, 65535], got 70000");
  s.port = 1;
  s.workers = 0;
  absl::Status workers = schema.Validate();
  CHECK(workers.code() == absl::StatusCode::kInvalidArgument);
  CHECK(workers.message() == "--num-workers must be in [1, 64], got 0");
  s.workers = 64;
  CHECK(schema.Validate().ok());
}

TEST_CASE("config: Describe lists every setting", "[config]") {
  Settings s;
  ConfigSchema schema = MakeSchema(&s);
  CHECK(schema.Describe() == std::vector<std::string>{
                                 "port: integer (port to listen on)",
                                 "num_workers: integer (workers)",
                                 "bind_address: string (address to listen on)",
                                 "tags: list of strings (worker tags)",
                             });
}

TEST_CASE("config: ParseDaemonConfig list flags replace the file's list", "[config]") {
  TempDir dir;
  const std::string path = dir.File("settings.yaml");
  WriteFile(path, "tags: [x, y]\n");
  SECTION("from the file") {
    Settings s;
    ConfigSchema schema = MakeSchema(&s);
    CHECK(Parse({"--config", path}, schema) == -1);
    CHECK(s.tags == std::vector<std::string>{"x", "y"});
  }
  SECTION("repeated flags") {
    Settings s;
    ConfigSchema schema = MakeSchema(&s);
    CHECK(Parse({"--config", path, "--tags", "a", "--tags", "b"}, schema) == -1);
    CHECK(s.tags == std::vector<std::string>{"a", "b"});
  }
}

}  // namespace
}  // namespace sluice
