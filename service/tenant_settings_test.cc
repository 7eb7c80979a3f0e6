// auth.clients (issue 32's tenants): a list of {name, token_file} records in
// the file or on the command line, and what LoadServerSecurity makes of them.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config_schema.h"
#include "service/daemon.h"
#include "service/server_security.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::TempDir;
using testing::WriteFile;

absl::Status LoadInto(const TempDir& dir, const std::string& yaml, SecuritySettings* settings) {
  ConfigSchema schema("dispatcher");
  DescribeSecuritySettings(settings, &schema);
  WriteFile(dir.File("d.yaml"), yaml);
  return schema.LoadYamlFile(dir.File("d.yaml"));
}

int ParseFlags(std::vector<std::string> args, SecuritySettings* settings) {
  ConfigSchema schema("dispatcher");
  DescribeSecuritySettings(settings, &schema);
  args.insert(args.begin(), "dispatcherd");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return ParseDaemonConfig(static_cast<int>(args.size()), argv.data(), "test", schema);
}

TEST_CASE("tenant settings: auth.clients loads from YAML and from flags", "[config][tenants]") {
  TempDir dir;
  SecuritySettings from_file;
  REQUIRE(LoadInto(dir,
                   "auth:\n  clients:\n    - {name: vision, token_file: /v.token}\n"
                   "    - name: speech\n      token_file: /s.token\n",
                   &from_file)
              .ok());
  CHECK(from_file.clients ==
        std::vector<ConfigSchema::Record>{{{"name", "vision"}, {"token_file", "/v.token"}},
                                          {{"name", "speech"}, {"token_file", "/s.token"}}});
  SecuritySettings from_flags;
  REQUIRE(ParseFlags({"--auth-clients", "name=a,token_file=/a", "--auth-clients", "token_file=/b,name=b"},
                     &from_flags) == -1);
  CHECK(from_flags.clients == std::vector<ConfigSchema::Record>{{{"name", "a"}, {"token_file", "/a"}},
                                                                {{"name", "b"}, {"token_file", "/b"}}});
  // A tenant's own data roots (a list) and cache_dir, both optional.
  SecuritySettings with_roots;
  REQUIRE(
      LoadInto(
          dir,
          "auth:\n  clients:\n    - {name: vision, token_file: /v.token, data_roots: [/data/v, "
          "'s3://b/v/'], cache_dir: /cache/v}\n    - {name: speech, token_file: /s.token, data_roots: /s}\n",
          &with_roots)
          .ok());
  CHECK(with_roots.clients == std::vector<ConfigSchema::Record>{
                                  {{"name", "vision"},
                                   {"token_file", "/v.token"},
                                   {"data_roots", "/data/v;s3://b/v/"},
                                   {"cache_dir", "/cache/v"}},
                                  {{"name", "speech"}, {"token_file", "/s.token"}, {"data_roots", "/s"}}});
  CHECK(ConfigSchema::RecordItems("/data/v;s3://b/v/") == std::vector<std::string>{"/data/v", "s3://b/v/"});
  CHECK(ConfigSchema::RecordItems("").empty());
  SecuritySettings roots_by_flag;
  REQUIRE(ParseFlags({"--auth-clients", "name=a,token_file=/a,data_roots=/x;/y"}, &roots_by_flag) == -1);
  CHECK(roots_by_flag.clients ==
        std::vector<ConfigSchema::Record>{{{"name", "a"}, {"token_file", "/a"}, {"data_roots", "/x;/y"}}});
}

TEST_CASE("tenant settings: a malformed auth.clients names the file, line and what is wrong",
          "[config][tenants]") {
  TempDir dir;
  const std::string file = dir.File("d.yaml");
  struct Case {
    std::string yaml;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"auth: {clients: vision}\n",
       file + ":1:17: 'auth.clients' must be a list of maps of name, token_file, data_roots, cache_dir"},
      {"auth:\n  clients:\n    - {name: vision}\n",
       file + ":3:7: 'auth.clients': an entry lacks 'token_file'"},
      {"auth:\n  clients:\n    - {name: a, token_file: /a, role: admin}\n",
       file +
           ":3:33: unknown field 'role' in 'auth.clients' (fields: name, token_file, data_roots, cache_dir)"},
      {"auth:\n  clients:\n    - {name: a, token_file: /a, data_roots: [/x, [y]]}\n",
       file +
           ":3:50: 'auth.clients': 'data_roots' must be a list of strings, each non-empty and without ';'"},
      {"auth:\n  clients:\n    - {name: a, token_file: /a, cache_dir: [/c]}\n",
       file + ":3:44: 'auth.clients': 'cache_dir' must be a string"},
      {"auth:\n  clients:\n    - {name: [a], token_file: /a}\n",
       file + ":3:14: 'auth.clients': 'name' must be a string"},
  };
  for (const Case& c : cases) {
    INFO(c.yaml);
    SecuritySettings settings;
    const absl::Status status = LoadInto(dir, c.yaml, &settings);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(status.message()) == c.message);
  }
  SecuritySettings settings;
  CHECK(ParseFlags({"--auth-clients", "name=a"}, &settings) == kConfigErrorExitCode);
  CHECK(ParseFlags({"--auth-clients", "name=a,token_file=/a,role=x"}, &settings) == kConfigErrorExitCode);
}

TEST_CASE("tenant settings: tenants' tokens load, and bad names, repeats and shared tokens are refused",
          "[config][tenants]") {
  TempDir dir;
  for (const auto& [file, token] :
       std::vector<std::pair<std::string, std::string>>{{"cluster", "cluster-token-0123456789"},
                                                        {"client", "client-token-0123456789"},
                                                        {"a", "tenant-a-token-0123456789"},
                                                        {"b", "tenant-b-token-0123456789"}}) {
    WriteFile(dir.File(file), token + "\n");
    std::filesystem::permissions(dir.File(file), std::filesystem::perms::owner_read);
  }
  auto tenant = [&](const std::string& name, const std::string& file) {
    return ConfigSchema::Record{{"name", name}, {"token_file", dir.File(file)}};
  };
  SecuritySettings settings{.cluster_token_file = dir.File("cluster"),
                            .client_token_file = dir.File("client")};
  settings.clients = {tenant("a", "a"), tenant("b", "b")};
  absl::StatusOr<ServerSecurity> loaded = LoadServerSecurity(settings);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->tenants.size() == 2);
  CHECK(loaded->tenants[0].name == "a");
  CHECK(loaded->tenants[0].token == "tenant-a-token-0123456789");
  CHECK(loaded->tenants[1].name == "b");
  // Tenants alone (no single client token) are auth too.
  SecuritySettings tenants_only{.cluster_token_file = dir.File("cluster")};
  tenants_only.clients = {tenant("a", "a")};
  absl::StatusOr<ServerSecurity> only = LoadServerSecurity(tenants_only);
  REQUIRE(only.ok());
  CHECK(CheckBindAddress("dispatcherd", "0.0.0.0", *only).ok());

  struct Case {
    std::vector<ConfigSchema::Record> clients;
    bool cluster;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{tenant("a b", "a")},
       true,
       "auth.clients: tenant name 'a b' must be 1 to 64 letters, digits, '-', '_' or '.'"},
      {{tenant("", "a")},
       true,
       "auth.clients: tenant name '' must be 1 to 64 letters, digits, '-', '_' or '.'"},
      {{tenant("a", "a"), tenant("a", "b")}, true, "auth.clients: tenant 'a' is named twice"},
      {{tenant("a", "a"), tenant("b", "a")},
       true,
       "auth.clients 'b' and auth.clients 'a' hold the same token: give each its own"},
      {{tenant("a", "client")},
       true,
       "auth.clients 'a' and auth.client_token_file hold the same token: give each its own"},
      {{tenant("a", "a")},
       false,
       "auth.clients without auth.cluster_token_file would leave the worker RPCs open to anyone: set it too"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    SecuritySettings bad{.cluster_token_file = c.cluster ? dir.File("cluster") : "",
                         .client_token_file = c.cluster ? dir.File("client") : ""};
    bad.clients = c.clients;
    const absl::Status status = LoadServerSecurity(bad).status();
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(status.message()) == c.message);
  }
}

TEST_CASE("tenant settings: the metrics token loads and must differ from every other token",
          "[config][tenants]") {
  TempDir dir;
  for (const auto& [file, token] :
       std::vector<std::pair<std::string, std::string>>{{"cluster", "cluster-token-0123456789"},
                                                        {"client", "client-token-0123456789"},
                                                        {"metrics", "metrics-token-0123456789"},
                                                        {"a", "tenant-a-token-0123456789"}}) {
    WriteFile(dir.File(file), token + "\n");
    std::filesystem::permissions(dir.File(file), std::filesystem::perms::owner_read);
  }
  SecuritySettings settings{.cluster_token_file = dir.File("cluster"),
                            .client_token_file = dir.File("client"),
                            .metrics_token_file = dir.File("metrics")};
  settings.clients = {{{"name", "a"}, {"token_file", dir.File("a")}}};
  absl::StatusOr<ServerSecurity> loaded = LoadServerSecurity(settings);
  REQUIRE(loaded.ok());
  CHECK(loaded->metrics_token == "metrics-token-0123456789");
  for (const auto& [file, message] : std::vector<std::pair<std::string, std::string>>{
           {"cluster",
            "auth.metrics_token_file and auth.cluster_token_file hold the same token: give each its own"},
           {"client",
            "auth.metrics_token_file and auth.client_token_file hold the same token: give each its own"},
           {"a", "auth.clients 'a' and auth.metrics_token_file hold the same token: give each its own"}}) {
    SecuritySettings shared = settings;
    shared.metrics_token_file = dir.File(file);
    const absl::Status status = LoadServerSecurity(shared).status();
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(status.message()) == message);
  }
  const absl::Status missing =
      LoadServerSecurity(SecuritySettings{.metrics_token_file = dir.File("none")}).status();
  CHECK(missing.code() != absl::StatusCode::kOk);
  CHECK(std::string(missing.message()).find("auth.metrics_token_file") != std::string::npos);
}

}  // namespace
}  // namespace sluice
