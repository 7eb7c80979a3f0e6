// The dispatcher's settings as its command line gives them: the YAML file,
// flags over it, and the exit codes of bad ones.
#include "dispatcher/dispatcher_config.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "config/config_schema.h"
#include "tests/testing/config_args.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::TempDir;
using testing::WriteFile;

int Parse(const std::vector<std::string>& args, ConfigSchema& schema) {
  return testing::ParseArgs(args, schema);
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

}  // namespace
}  // namespace sluice
