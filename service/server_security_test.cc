// A daemon's auth, TLS and insecure settings (server_security.h): their
// sections in YAML and flags, the bind check, and the files they name.
#include "service/server_security.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "config/config_schema.h"
#include "service/daemon.h"
#include "tests/testing/config_args.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using testing::TempDir;
using testing::WriteFile;

int Parse(const std::vector<std::string>& args, ConfigSchema& schema) {
  return testing::ParseArgs(args, schema);
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
