#include "config/config_schema.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dispatcher/dispatcher_config.h"
#include "service/daemon.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using testing::TempDir;
using testing::WriteFile;

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

// Runs ParseDaemonConfig over a copy of `args` (argv[0] is added).
int Parse(const std::vector<std::string>& args, ConfigSchema& schema) {
  std::vector<std::string> storage = {"dispatcherd"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return ParseDaemonConfig(static_cast<int>(storage.size()), argv.data(), "test daemon", schema);
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

TEST_CASE("config: the dispatcher's settings load from YAML", "[config]") {
  TempDir dir;
  const std::string path = dir.File("dispatcher.yaml");
  WriteFile(path,
            "port: 7000\n"
            "bind_address: 127.0.0.1\n"
            "worker_timeout_ms: 2500\n"
            "client_timeout_ms: 3500\n"
            "splits_per_request: 16\n"
            "elements_per_split: 128\n"
            "log_level: debug\n"
            "port_file: /tmp/port\n");
  dispatcher::DispatcherConfig config;
  ConfigSchema schema("dispatcher");
  dispatcher::DescribeDispatcherConfig(&config, &schema);
  absl::Status status = schema.LoadYamlFile(path);
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(config.port == 7000);
  CHECK(config.bind_address == "127.0.0.1");
  CHECK(config.worker_timeout_ms == 2500);
  CHECK(config.client_timeout_ms == 3500);
  CHECK(config.splits_per_request == 16);
  CHECK(config.elements_per_split == 128);
  CHECK(config.log_level == "debug");
  CHECK(config.port_file == "/tmp/port");
}

TEST_CASE("config: ParseDaemonConfig lets flags override the file", "[config]") {
  TempDir dir;
  const std::string path = dir.File("dispatcher.yaml");
  WriteFile(path, "port: 7000\nlog_level: debug\nworker_timeout_ms: 1500\n");

  SECTION("--config PATH and a flag") {
    dispatcher::DispatcherConfig config;
    ConfigSchema schema("dispatcher");
    dispatcher::DescribeDispatcherConfig(&config, &schema);
    CHECK(Parse({"--config", path, "--port", "7001"}, schema) == -1);
    CHECK(config.port == 7001);
    CHECK(config.log_level == "debug");
    CHECK(config.worker_timeout_ms == 1500);
  }
  SECTION("the flag before --config still wins") {
    dispatcher::DispatcherConfig config;
    ConfigSchema schema("dispatcher");
    dispatcher::DescribeDispatcherConfig(&config, &schema);
    CHECK(Parse({"--port=7002", "--config", path}, schema) == -1);
    CHECK(config.port == 7002);
    CHECK(config.log_level == "debug");
  }
  SECTION("--config=PATH") {
    dispatcher::DispatcherConfig config;
    ConfigSchema schema("dispatcher");
    dispatcher::DescribeDispatcherConfig(&config, &schema);
    CHECK(Parse({"--config=" + path}, schema) == -1);
    CHECK(config.port == 7000);
    CHECK(config.log_level == "debug");
    CHECK(config.worker_timeout_ms == 1500);
    CHECK(config.bind_address == "127.0.0.1");  // the default: loopback only
  }
  SECTION("dashed flags for underscored keys") {
    dispatcher::DispatcherConfig config;
    ConfigSchema schema("dispatcher");
    dispatcher::DescribeDispatcherConfig(&config, &schema);
    CHECK(Parse({"--config=" + path, "--worker-timeout-ms", "500", "--log-level", "warn", "--bind-address",
                 "10.0.0.1"},
                schema) == -1);
    CHECK(config.worker_timeout_ms == 500);
    CHECK(config.log_level == "warn");
    CHECK(config.bind_address == "10.0.0.1");
    CHECK(config.port == 7000);
  }
  SECTION("no file, no flags: the defaults") {
    dispatcher::DispatcherConfig config;
    ConfigSchema schema("dispatcher");
    dispatcher::DescribeDispatcherConfig(&config, &schema);
    CHECK(Parse({}, schema) == -1);
    CHECK(config.port == 5000);
    CHECK(config.worker_timeout_ms == 10000);
    CHECK(config.log_level == "info");
  }
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

TEST_CASE("config: ParseDaemonConfig errors exit with 2", "[config]") {
  TempDir dir;
  dispatcher::DispatcherConfig config;
  ConfigSchema schema("dispatcher");
  dispatcher::DescribeDispatcherConfig(&config, &schema);

  SECTION("a bad file") {
    const std::string path = dir.File("bad.yaml");
    WriteFile(path, "prot: 7000\n");
    CHECK(Parse({"--config", path}, schema) == kConfigErrorExitCode);
    CHECK(kConfigErrorExitCode == 2);
  }
  SECTION("a missing file") { CHECK(Parse({"--config=" + dir.File("absent.yaml")}, schema) == 2); }
  SECTION("an unknown flag") { CHECK(Parse({"--nope", "1"}, schema) == 2); }
  SECTION("a flag that is not a number") { CHECK(Parse({"--port", "abc"}, schema) == 2); }
  SECTION("a flag out of range") { CHECK(Parse({"--port", "70000"}, schema) == 2); }
  SECTION("a flag taking the file's value out of range") {
    const std::string path = dir.File("ok.yaml");
    WriteFile(path, "worker_timeout_ms: 500\n");
    CHECK(Parse({"--config", path, "--worker-timeout-ms", "5"}, schema) == 2);
  }
  SECTION("a stray positional argument") { CHECK(Parse({"extra"}, schema) == 2); }
}

TEST_CASE("config: ParseDaemonConfig --help exits with 0", "[config]") {
  TempDir dir;
  dispatcher::DispatcherConfig config;
  ConfigSchema schema("dispatcher");
  dispatcher::DescribeDispatcherConfig(&config, &schema);
  SECTION("--help") { CHECK(Parse({"--help"}, schema) == 0); }
  SECTION("-h") { CHECK(Parse({"-h"}, schema) == 0); }
  SECTION("--help with a broken config file does not read it") {
    const std::string path = dir.File("bad.yaml");
    WriteFile(path, "prot: 7000\n");
    CHECK(Parse({"--config", path, "--help"}, schema) == 0);
  }
}

TEST_CASE("config: sections nest settings, booleans are true or false, and flags take dashes", "[config]") {
  testing::TempDir dir;
  SecuritySettings security;
  ConfigSchema schema("worker");
  DescribeSecuritySettings(&security, &schema);
  const std::string file = dir.File("worker.yaml");
  testing::WriteFile(file,
                     "auth:\n"
                     "  cluster_token_file: /etc/sluice/cluster.token\n"
                     "tls:\n"
                     "  cert_file: /c.pem\n"
                     "  require_client_cert: true\n"
                     "insecure: false\n");
  REQUIRE(schema.LoadYamlFile(file).ok());
  CHECK(security.cluster_token_file == "/etc/sluice/cluster.token");
  CHECK(security.tls_cert_file == "/c.pem");
  CHECK(security.tls_require_client_cert);
  CHECK_FALSE(security.insecure);
  CHECK(ConfigSchema::FlagName("tls.require_client_cert") == "--tls-require-client-cert");

  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"auth:\n  client_tokn_file: x\n",
       file + ":2:3: unknown worker setting 'auth.client_tokn_file'; did you mean 'auth.client_token_file'?"},
      {"tls: /c.pem\n", file + ":1:6: 'tls' is a section: a map of settings"},
      {"insecure: yes please\n", file + ":1:11: 'insecure' must be true or false"},
      {"tls:\n  cert_file: [a]\n", file + ":2:14: 'tls.cert_file' must be a string"},
  };
  for (const Case& c : cases) {
    testing::WriteFile(file, c.text);
    SecuritySettings fresh;
    ConfigSchema again("worker");
    DescribeSecuritySettings(&fresh, &again);
    CHECK(std::string(again.LoadYamlFile(file).message()) == c.message);
  }
}

TEST_CASE("config: a section's flag overrides the file, and a bare boolean flag sets true", "[config]") {
  testing::TempDir dir;
  SecuritySettings security;
  ConfigSchema schema("dispatcher");
  DescribeSecuritySettings(&security, &schema);
  const std::string file = dir.File("d.yaml");
  testing::WriteFile(file, "tls: {cert_file: /from-file.pem}\n");
  REQUIRE(Parse({"--config", file, "--tls-cert-file", "/from-flag.pem", "--insecure"}, schema) == -1);
  CHECK(security.tls_cert_file == "/from-flag.pem");
  CHECK(security.insecure);
}

TEST_CASE("security settings: loopback binds are safe, others need auth, TLS or insecure", "[config]") {
  CHECK(IsLoopbackAddress("127.0.0.1"));
  CHECK(IsLoopbackAddress("127.3.2.1"));
  CHECK(IsLoopbackAddress("localhost"));
  CHECK(IsLoopbackAddress("::1"));
  CHECK(IsLoopbackAddress("[::1]"));
  CHECK_FALSE(IsLoopbackAddress("0.0.0.0"));
  CHECK_FALSE(IsLoopbackAddress("::"));
  CHECK_FALSE(IsLoopbackAddress("10.1.2.3"));
  CHECK_FALSE(IsLoopbackAddress("worker-3.example"));
  CHECK(CheckBindAddress("workerd", "127.0.0.1", {}).ok());
  const absl::Status refused = CheckBindAddress("workerd", "0.0.0.0", {});
  CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.message()),
             StartsWith("workerd refuses to listen on 0.0.0.0 without authentication or TLS"));
  CHECK_FALSE(CheckBindAddress("workerd", "0.0.0.0", {.cluster_token = "a"}).ok());  // one token is not auth
  CHECK(CheckBindAddress("workerd", "0.0.0.0", {.cluster_token = "a", .client_token = "b"}).ok());
  // TLS authenticates no caller by itself (issue 32, finding 16).
  const absl::Status tls_alone = CheckBindAddress("workerd", "0.0.0.0", {.tls = true});
  CHECK(tls_alone.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(tls_alone.message()) ==
        "workerd refuses to listen on 0.0.0.0 with TLS but no client authentication: TLS encrypts the calls, "
        "yet anyone who can reach the port could register pipelines, read any job or pose as a worker. Add "
        "auth (auth.cluster_token_file and auth.client_token_file) or tls.require_client_cert; or, on a "
        "network you trust, opt out with 'insecure: true' (--insecure)");
  CHECK(CheckBindAddress("workerd", "0.0.0.0", {.tls = true, .require_client_cert = true}).ok());
  CHECK(CheckBindAddress("workerd", "0.0.0.0", {.tls = true, .insecure = true}).ok());
  CHECK(CheckBindAddress("workerd", "127.0.0.1", {.tls = true}).ok());
  CHECK(CheckBindAddress("workerd", "0.0.0.0", {.insecure = true}).ok());
}

TEST_CASE("security settings: files are read, and bad ones are errors naming the setting", "[config]") {
  testing::TempDir dir;
  testing::WriteFile(dir.File("same"), "token\n");
  testing::WriteFile(dir.File("cert"), "not a certificate\n");
  testing::WriteFile(dir.File("long"), std::string(5000, 'x'));
  CHECK(
      std::string(
          LoadServerSecurity({.cluster_token_file = dir.File("same"), .client_token_file = dir.File("same")})
              .status()
              .message()) ==
      "auth.client_token_file and auth.cluster_token_file hold the same token: a client could then act as a "
      "worker; give them different tokens");
  CHECK(std::string(LoadServerSecurity({.tls_cert_file = dir.File("cert"), .tls_key_file = dir.File("cert")})
                        .status()
                        .message()) ==
        "tls.cert_file '" + dir.File("cert") + "': not a PEM file (no -----BEGIN line)");
  CHECK(std::string(LoadServerSecurity({.client_token_file = dir.File("long")}).status().message()) ==
        "auth.client_token_file '" + dir.File("long") + "': longer than 4096 bytes");
  CHECK(std::string(LoadServerSecurity({.tls_require_client_cert = true}).status().message()) ==
        "TLS needs both tls.cert_file and tls.key_file");
  testing::WriteFile(dir.File("other"), "other\n");
  CHECK(std::string(LoadServerSecurity({.client_token_file = dir.File("same")}).status().message()) ==
        "auth.client_token_file without auth.cluster_token_file would leave the worker RPCs open to anyone: "
        "set "
        "both");
  absl::StatusOr<ServerSecurity> tokens =
      LoadServerSecurity({.cluster_token_file = dir.File("other"), .client_token_file = dir.File("same")});
  REQUIRE(tokens.ok());
  CHECK(tokens->client_token == "token");
  CHECK(tokens->cluster_token == "other");
}

}  // namespace
}  // namespace sluice
