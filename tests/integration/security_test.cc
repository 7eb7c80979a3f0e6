// Integration tests of issue 18's security on real daemons: token auth and
// its roles, TLS and mutual TLS (with a throwaway CA made by openssl),
// the refused insecure bind, plugins only from the operator, and
// data_roots.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "service/channel_security.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/security_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::ReadToEnd;
using testing::TestCluster;

using testing::kClientToken;
using testing::kClusterToken;
using testing::ScopedClientSecurity;
using testing::TokenFlags;

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A raw call of one dispatcher RPC with `security` and a default request
// (auth is checked before the request is read), bounded to 5 s.
template <typename Request, typename Response>
grpc::Status CallWith(const std::string& address, const ChannelSecurity& security,
                      grpc::Status (proto::DispatcherService::Stub::*method)(grpc::ClientContext*,
                                                                             const Request&, Response*)) {
  auto stub = proto::DispatcherService::NewStub(MakeSecureChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  Response response;
  return ((*stub).*method)(&context, Request(), &response);
}

grpc::Status GetVersion(const std::string& address, const ChannelSecurity& security) {
  return CallWith(address, security, &proto::DispatcherService::Stub::GetVersion);
}

TEST_CASE("security: with tokens, a read needs the client token, and a wrong or missing one is refused",
          "[service][security]") {
  testing::TempDir dir;
  const std::vector<std::string> tokens = TokenFlags(dir);
  ScopedClientSecurity client({.token = kClientToken});
  TestCluster cluster({.num_workers = 1, .dispatcher_args = tokens, .worker_args = tokens});
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2, 3, 4});

  grpc::Status none = GetVersion(cluster.DispatcherAddress(), {});
  CHECK(none.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(
      none.error_message() ==
      "GetVersion needs the client token and the call carried none (set SLUICE_TOKEN_FILE, or --token-file)");
  grpc::Status wrong = GetVersion(cluster.DispatcherAddress(), {.token = "client-fedcba9876543211"});
  CHECK(wrong.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(wrong.error_message() == "GetVersion needs the client token and the call carried a wrong one");
  CHECK(GetVersion(cluster.DispatcherAddress(), {.token = kClusterToken}).ok());
  // Refused at the transport, before the request's body (service/call_gate.h),
  // and logged; gRPC does not name the peer there.
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dir().File("dispatcher.log")),
             Contains("refused a call from a peer gRPC does not name at the transport: GetVersion needs the "
                      "client token and the call carried none"));

  // The SDK without the token: the read fails saying why.
  SetDefaultChannelSecurity({});
  absl::Status refused =
      ReadToEnd(Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl()}), nullptr);
  CHECK(refused.code() == absl::StatusCode::kUnauthenticated);
  CHECK_THAT(std::string(refused.message()), Contains("needs the client token and the call carried none"));
}

TEST_CASE("security: the CLI takes the client token from --token-file or SLUICE_TOKEN_FILE",
          "[service][security]") {
  testing::TempDir dir;
  const std::vector<std::string> tokens = TokenFlags(dir);
  ScopedClientSecurity client({.token = kClientToken});
  TestCluster cluster({.num_workers = 1, .dispatcher_args = tokens, .worker_args = tokens});
  testing::WriteFile(dir.File("p.yaml"), "pipeline:\n  - range: 3\n");
  const std::string read = absl::StrCat("timeout 60 '", SLUICE_CLI, "' read '", dir.File("p.yaml"),
                                        "' --service ", cluster.ServiceUrl());
  const testing::CommandResult with_flag =
      testing::RunCommand(absl::StrCat(read, " --token-file '", dir.File("client.token"), "' 2>&1"));
  CHECK(with_flag.exit_code == 0);
  CHECK(with_flag.out == "0\n1\n2\n");
  const testing::CommandResult with_env =
      testing::RunCommand(absl::StrCat("SLUICE_TOKEN_FILE='", dir.File("client.token"), "' ", read, " 2>&1"));
  CHECK(with_env.exit_code == 0);
  CHECK(with_env.out == "0\n1\n2\n");
  const testing::CommandResult without =
      testing::RunCommand(absl::StrCat("env -u SLUICE_TOKEN_FILE ", read, " 2>&1"));
  CHECK(without.exit_code == 2);  // the user's to fix, as any refusal by the service
  CHECK_THAT(without.out, Contains("needs the client token and the call carried none"));
  const testing::CommandResult missing =
      testing::RunCommand(absl::StrCat(read, " --token-file '", dir.File("nope.token"), "' 2>&1"));
  CHECK(missing.exit_code == 2);
  CHECK(missing.out ==
        "sluice: token file '" + dir.File("nope.token") + "': cannot read: No such file or directory\n");
}

TEST_CASE("security: a client token cannot make the worker RPCs", "[service][security]") {
  testing::TempDir dir;
  const std::vector<std::string> tokens = TokenFlags(dir);
  ScopedClientSecurity client({.token = kClientToken});
  TestCluster cluster({.num_workers = 1, .dispatcher_args = tokens, .worker_args = tokens});
  const ChannelSecurity as_client{.token = kClientToken};
  auto expect_refused = [](const grpc::Status& status, const std::string& method) {
    CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(status.error_message() ==
          method +
              " is a worker's RPC: it needs the cluster token, and the call carried the "
              "client token");
  };
  using Stub = proto::DispatcherService::Stub;
  const std::string address = cluster.DispatcherAddress();
  expect_refused(CallWith(address, as_client, &Stub::WorkerHeartbeat), "WorkerHeartbeat");
  expect_refused(CallWith(address, as_client, &Stub::WorkerUpdates), "WorkerUpdates");
  expect_refused(CallWith(address, as_client, &Stub::WorkerShutdown), "WorkerShutdown");
  expect_refused(CallWith(address, as_client, &Stub::GetSplits), "GetSplits");
  // Without any token, the same RPCs name the cluster token.
  const grpc::Status bare = CallWith(address, {}, &Stub::GetSplits);
  CHECK(bare.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(bare.error_message() == "GetSplits needs the cluster token and the call carried none");
  // And a worker's ProcessTask.
  const std::string worker_port =
      testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  auto worker = proto::WorkerService::NewStub(
      MakeSecureChannel(absl::StrCat("127.0.0.1:", std::stoi(worker_port)), as_client));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  proto::ProcessTaskResponse processed;
  expect_refused(worker->ProcessTask(&context, proto::ProcessTaskRequest(), &processed), "ProcessTask");
  // The real worker, with the cluster token, is still registered and serves.
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2});
}

// A throwaway CA, a certificate for 127.0.0.1 that both daemons serve
// (and present to each other), and a client certificate, made by openssl.
struct Certificates {
  std::string ca, server_cert, server_key, client_cert, client_key;
  // Names only DNS:sluice, as certificates for daemons at pod IPs do.
  std::string named_cert, named_key;
};
Certificates MakeCertificates(const testing::TempDir& dir) {
  testing::WriteFile(dir.File("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  testing::WriteFile(dir.File("named.ext"), "subjectAltName=DNS:sluice\n");
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script = absl::StrCat(
      "set -e; cd ", dir.path(), "; exec 2>openssl.log; ", "openssl req -x509 ", key,
      " -keyout ca.key -out ca.pem -days 1 -subj /CN=sluice-test-ca; ", "openssl req ", key,
      " -keyout server.key -out server.csr -subj /CN=127.0.0.1; ",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 "
      "-extfile san.ext; ",
      "openssl req ", key, " -keyout client.key -out client.csr -subj /CN=trainer; ",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1; ",
      "openssl req ", key, " -keyout named.key -out named.csr -subj /CN=sluice; ",
      "openssl x509 -req -in named.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out named.pem -days 1 "
      "-extfile named.ext");
  const testing::CommandResult made = testing::RunCommand(script);
  INFO(testing::ReadFileOrEmpty(dir.File("openssl.log")));
  REQUIRE(made.exit_code == 0);
  return {dir.File("ca.pem"),     dir.File("server.pem"), dir.File("server.key"), dir.File("client.pem"),
          dir.File("client.key"), dir.File("named.pem"),  dir.File("named.key")};
}

std::vector<std::string> TlsFlags(const Certificates& certs) {
  return {"--tls-cert-file", certs.server_cert, "--tls-key-file",
          certs.server_key,  "--tls-ca-file",   certs.ca};
}

ChannelSecurity ClientTls(const Certificates& certs, bool with_certificate) {
  absl::StatusOr<ChannelSecurity> security =
      LoadChannelSecurity({.tls_ca_file = certs.ca,
                           .tls_cert_file = with_certificate ? certs.client_cert : "",
                           .tls_key_file = with_certificate ? certs.client_key : ""});
  REQUIRE(security.ok());
  return *security;
}

TEST_CASE("security: TLS, and mutual TLS refusing a client without a certificate", "[service][security]") {
  testing::TempDir dir;
  const Certificates certs = MakeCertificates(dir);
  {
    ScopedClientSecurity client(ClientTls(certs, false));
    TestCluster cluster(
        {.num_workers = 1, .dispatcher_args = TlsFlags(certs), .worker_args = TlsFlags(certs)});
    std::vector<int64_t> values;
    REQUIRE(ReadToEnd(Dataset::Range(4).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
    CHECK(values == std::vector<int64_t>{0, 1, 2, 3});
    // Plaintext to a TLS port gets nowhere.
    CHECK_FALSE(GetVersion(cluster.DispatcherAddress(), {}).ok());
    CHECK(GetVersion(cluster.DispatcherAddress(), ClientTls(certs, false)).ok());
  }
  {
    const std::vector<std::string> mutual = Concat(TlsFlags(certs), {"--tls-require-client-cert"});
    ScopedClientSecurity client(ClientTls(certs, true));
    TestCluster cluster({.num_workers = 1, .dispatcher_args = mutual, .worker_args = mutual});
    std::vector<int64_t> values;
    REQUIRE(ReadToEnd(Dataset::Range(4).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
    CHECK(values == std::vector<int64_t>{0, 1, 2, 3});
    CHECK_FALSE(GetVersion(cluster.DispatcherAddress(), ClientTls(certs, false)).ok());
    CHECK(GetVersion(cluster.DispatcherAddress(), ClientTls(certs, true)).ok());
  }
}

TEST_CASE("security: certificates that do not name the address verify against tls.server_name",
          "[service][security]") {
  testing::TempDir dir;
  const Certificates certs = MakeCertificates(dir);
  const std::vector<std::string> flags = {"--tls-cert-file",   certs.named_cert, "--tls-key-file",
                                          certs.named_key,     "--tls-ca-file",  certs.ca,
                                          "--tls-server-name", "sluice"};
  ChannelSecurity named = ClientTls(certs, false);
  named.server_name = "sluice";
  ScopedClientSecurity client(named);
  TestCluster cluster({.num_workers = 1, .dispatcher_args = flags, .worker_args = flags});
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2});
  // Without the name, 127.0.0.1 is not in the certificate.
  CHECK_FALSE(GetVersion(cluster.DispatcherAddress(), ClientTls(certs, false)).ok());
}

TEST_CASE("security: TLS and tokens together", "[service][security]") {
  testing::TempDir dir;
  const Certificates certs = MakeCertificates(dir);
  const std::vector<std::string> flags = Concat(TlsFlags(certs), TokenFlags(dir));
  ChannelSecurity security = ClientTls(certs, false);
  security.token = kClientToken;
  ScopedClientSecurity client(security);
  TestCluster cluster({.num_workers = 2, .dispatcher_args = flags, .worker_args = flags});
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(6).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  std::sort(values.begin(), values.end());
  CHECK(values == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5});
  grpc::Status no_token = GetVersion(cluster.DispatcherAddress(), ClientTls(certs, false));
  CHECK(no_token.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(
      no_token.error_message() ==
      "GetVersion needs the client token and the call carried none (set SLUICE_TOKEN_FILE, or --token-file)");
  // Over TLS too the gate refuses it before its body is read.
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dir().File("dispatcher.log")),
             Contains("refused a call from a peer gRPC does not name at the transport: GetVersion needs"));
}

TEST_CASE("security: a token file that cannot be read stops the daemon with exit 2 naming it",
          "[service][security]") {
  testing::TempDir dir;
  testing::WriteFile(dir.File("empty.token"), "\n");
  struct Case {
    std::vector<std::string> argv;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{SLUICE_DISPATCHERD, "--port", "0", "--auth-client-token-file", dir.File("missing.token")},
       "auth.client_token_file '" + dir.File("missing.token") + "': cannot read: No such file or directory"},
      {{SLUICE_DISPATCHERD, "--port", "0", "--auth-cluster-token-file", dir.File("empty.token")},
       "auth.cluster_token_file '" + dir.File("empty.token") + "': the file is empty"},
      {{SLUICE_WORKERD, "--dispatcher", "127.0.0.1:1", "--tls-cert-file", dir.File("empty.token")},
       "TLS needs both tls.cert_file and tls.key_file"},
  };
  for (const Case& c : cases) {
    const std::string log = dir.File("daemon.log");
    auto daemon = testing::Process::Start(c.argv, log);
    REQUIRE(daemon.ok());
    CHECK((*daemon)->Wait(std::chrono::seconds(20)) == 2);
    CHECK_THAT(testing::ReadFileOrEmpty(log), Contains(c.message));
  }
}

TEST_CASE("security: listening beyond loopback needs auth or TLS, or an explicit --insecure",
          "[service][security]") {
  testing::TempDir dir;
  const std::vector<std::string> tokens = TokenFlags(dir);
  for (const std::string& program : {std::string(SLUICE_DISPATCHERD), std::string(SLUICE_WORKERD)}) {
    std::vector<std::string> base = {program, "--port", "0", "--bind-address", "0.0.0.0"};
    if (program == SLUICE_WORKERD) base = Concat(base, {"--dispatcher", "127.0.0.1:1"});
    const std::string log = dir.File("refused.log");
    auto refused = testing::Process::Start(base, log);
    REQUIRE(refused.ok());
    CHECK((*refused)->Wait(std::chrono::seconds(20)) == 2);
    const std::string text = testing::ReadFileOrEmpty(log);
    CHECK_THAT(text, Contains("refuses to listen on 0.0.0.0 without authentication or TLS"));
    CHECK_THAT(text, Contains("auth.cluster_token_file and auth.client_token_file"));
    CHECK_THAT(text, Contains("tls.cert_file and tls.key_file"));
    CHECK_THAT(text, Contains("opt out with 'insecure: true' (--insecure)"));
    if (program == SLUICE_WORKERD) continue;  // a worker would wait for its dispatcher
    for (const std::vector<std::string>& extra : {std::vector<std::string>{"--insecure"}, tokens}) {
      const std::string port_file = dir.File("bound.port");
      std::filesystem::remove(port_file);
      auto started = testing::Process::Start(Concat(Concat(base, extra), {"--port-file", port_file}),
                                             dir.File("started.log"));
      REQUIRE(started.ok());
      CHECK(!testing::WaitForFile(port_file, std::chrono::seconds(20)).empty());
      CHECK((*started)->Terminate() == 0);
    }
  }
}

TEST_CASE("security: TLS alone beyond loopback is refused, mutual TLS starts", "[service][security]") {
  testing::TempDir dir;
  const Certificates certs = MakeCertificates(dir);
  const std::vector<std::string> base = {SLUICE_DISPATCHERD, "--port",         "0",
                                         "--bind-address",   "0.0.0.0",        "--tls-cert-file",
                                         certs.server_cert,  "--tls-key-file", certs.server_key};
  auto refused = testing::Process::Start(base, dir.File("refused.log"));
  REQUIRE(refused.ok());
  CHECK((*refused)->Wait(std::chrono::seconds(20)) == 2);
  CHECK_THAT(testing::ReadFileOrEmpty(dir.File("refused.log")),
             Contains("dispatcherd refuses to listen on 0.0.0.0 with TLS but no client authentication: TLS "
                      "encrypts the calls, yet anyone who can reach the port could register pipelines"));
  const std::string port_file = dir.File("bound.port");
  auto started = testing::Process::Start(
      Concat(base, {"--tls-ca-file", certs.ca, "--tls-require-client-cert", "--port-file", port_file}),
      dir.File("started.log"));
  REQUIRE(started.ok());
  CHECK(!testing::WaitForFile(port_file, std::chrono::seconds(20)).empty());
  CHECK((*started)->Terminate() == 0);
}

TEST_CASE("security: an HTTP port beyond loopback is warned about at start", "[service][security]") {
  testing::TempDir dir;
  const std::string port_file = dir.File("bound.port");
  auto started = testing::Process::Start({SLUICE_DISPATCHERD, "--port", "0", "--port-file", port_file,
                                          "--http-port", "0", "--http-bind-address", "0.0.0.0"},
                                         dir.File("started.log"));
  REQUIRE(started.ok());
  REQUIRE(!testing::WaitForFile(port_file, std::chrono::seconds(20)).empty());
  CHECK((*started)->Terminate() == 0);
  CHECK_THAT(
      testing::ReadFileOrEmpty(dir.File("started.log")),
      Contains("the HTTP port on 0.0.0.0 has no auth or TLS: /metrics, /healthz and the status page (jobs, "
               "workers, errors) are open to anyone who can reach it; keep it on the monitoring network"));
}

TEST_CASE("security: workers read files only under their data_roots, after symlinks and '..'",
          "[service][security]") {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("data"));
  testing::WriteFile(dir.File("data/lines.txt"), "one\ntwo\n");
  testing::WriteFile(dir.File("secret.txt"), "password\n");
  std::filesystem::create_symlink(dir.File("secret.txt"), dir.File("data/link.txt"));
  TestCluster cluster({.num_workers = 1, .worker_args = {"--data-roots", dir.File("data")}});
  const std::string worker_port =
      testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  const std::string worker = absl::StrCat("worker 127.0.0.1:", std::stoi(worker_port));
  const std::string roots = std::filesystem::canonical(dir.File("data")).string();
  std::vector<std::string> lines;
  REQUIRE(
      testing::ReadLines(
          Dataset::TextLine({dir.File("data/lines.txt")}).ReadFromService({.service = cluster.ServiceUrl()}),
          &lines)
          .ok());
  CHECK(lines == std::vector<std::string>{"one", "two"});
  for (const std::string& path : {dir.File("secret.txt"), dir.File("data/link.txt"),
                                  dir.File("data/../secret.txt"), std::string("/etc/passwd")}) {
    lines.clear();
    absl::Status refused = testing::ReadLines(
        Dataset::TextLine({path}).ReadFromService({.service = cluster.ServiceUrl()}), &lines);
    INFO(path);
    CHECK_FALSE(refused.ok());
    CHECK_THAT(std::string(refused.message()), Contains("'" + path + "'"));
    CHECK_THAT(std::string(refused.message()),
               Contains("is outside the data roots of " + worker + " (" + roots + ")"));
    CHECK(lines.empty());
  }
}

TEST_CASE("security: a pipeline names a plugin, and only daemons that loaded it run it",
          "[service][security]") {
  const std::string plugin = SLUICE_EXAMPLE_PLUGIN;
  {
    // Neither daemon loaded it: the dispatcher refuses the pipeline.
    TestCluster cluster({.num_workers = 1});
    absl::Status refused = ReadToEnd(Dataset::Range(7)
                                         .WithPlugin(plugin)
                                         .Filter("example.is_even")
                                         .ReadFromService({.service = cluster.ServiceUrl()}),
                                     nullptr);
    CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(refused.message()),
               Contains("the pipeline needs plugin '" + plugin + "', which dispatcher 127.0.0.1:"));
    CHECK_THAT(std::string(refused.message()), Contains("never one a request names"));
  }
  {
    // The dispatcher loaded it, the worker did not: the worker refuses the task.
    TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--plugins", plugin}});
    const std::string worker_port =
        testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
    absl::Status refused = ReadToEnd(Dataset::Range(7)
                                         .WithPlugin(plugin)
                                         .Filter("example.is_even")
                                         .ReadFromService({.service = cluster.ServiceUrl()}),
                                     nullptr);
    CHECK_FALSE(refused.ok());
    CHECK_THAT(std::string(refused.message()),
               Contains(absl::StrCat("which worker 127.0.0.1:", std::stoi(worker_port), " has not loaded")));
  }
  {
    TestCluster cluster(
        {.num_workers = 1, .dispatcher_args = {"--plugins", plugin}, .worker_args = {"--plugins", plugin}});
    std::vector<int64_t> values;
    REQUIRE(ReadToEnd(Dataset::Range(7)
                          .WithPlugin(plugin)
                          .Filter("example.is_even")
                          .ReadFromService({.service = cluster.ServiceUrl()}),
                      &values)
                .ok());
    CHECK(values == std::vector<int64_t>{0, 2, 4, 6});
  }
}

}  // namespace
}  // namespace sluice
