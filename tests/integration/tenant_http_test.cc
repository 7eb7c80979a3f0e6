// Issue 32's tenants on the HTTP port: with client tokens configured, the
// status page, /status.json and /metrics need a token (Bearer, or basic
// auth with the token as the password), show a tenant only its own, and
// show the cluster token everything; /healthz needs none. Real daemons,
// requests over a raw socket.

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "sluice/dataset.h"
#include "tests/integration/security_helpers.h"
#include "tests/integration/test_cluster.h"
#include "tests/testing/raw_connection.h"

namespace sluice {
namespace {

using testing::ScopedClientSecurity;
using testing::TestCluster;

struct Answer {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

// GET `path` from 127.0.0.1:`port` with these extra header lines, on a
// connection of its own (each answer closes it), waiting at most 10 s.
Answer Get(int port, const std::string& path, const std::string& extra_headers = "") {
  Answer answer;
  const std::string response =
      testing::Exchange(port,
                        absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n", extra_headers,
                                     "Connection: close\r\n\r\n"),
                        std::chrono::seconds(10));
  const size_t end_of_head = response.find("\r\n\r\n");
  if (end_of_head == std::string::npos || response.size() < 12) return answer;
  answer.head = response.substr(0, end_of_head);
  answer.body = response.substr(end_of_head + 4);
  answer.status = std::stoi(response.substr(9, 3));
  return answer;
}

std::string Bearer(const std::string& token) { return absl::StrCat("Authorization: Bearer ", token, "\r\n"); }
std::string Basic(const std::string& token) {
  return absl::StrCat("Authorization: Basic ", absl::Base64Escape("anyone:" + token), "\r\n");
}

// The text of a top-level JSON array of /status.json, "[...]".
std::string Section(const std::string& json, const std::string& name) {
  const size_t start = json.find(absl::StrCat("\"", name, "\":["));
  if (start == std::string::npos) return "";
  int depth = 0;
  for (size_t i = json.find('[', start); i < json.size(); ++i) {
    depth += json[i] == '[' ? 1 : json[i] == ']' ? -1 : 0;
    if (depth == 0) return json.substr(json.find('[', start), i + 1 - json.find('[', start));
  }
  return "";
}

int CountOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// The sample lines of a /metrics text whose name starts with `prefix`.
std::vector<std::string> Samples(const std::string& metrics, const std::string& prefix) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < metrics.size()) {
    size_t end = metrics.find('\n', start);
    if (end == std::string::npos) end = metrics.size();
    const std::string line = metrics.substr(start, end - start);
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

constexpr char kHowTo[] =
    "send 'Authorization: Bearer TOKEN', or basic auth with the token as the password; the cluster token "
    "sees every tenant, a client token its own\n";

TEST_CASE(
    "tenants on the HTTP port: a token shows its tenant's own status and metrics, the cluster token all",
    "[service][security][tenants]") {
  testing::TempDir dir;
  const std::vector<std::string> flags = testing::TenantFlags(dir, {"alpha", "beta"});
  std::vector<std::string> dispatcher_args = flags;
  dispatcher_args.insert(dispatcher_args.end(),
                         {"--http-port", "0", "--http-port-file", dir.File("dispatcher_http.port")});
  std::vector<std::string> worker_args = flags;
  worker_args.insert(worker_args.end(),
                     {"--http-port", "0", "--http-port-file", dir.File("worker_http.port")});
  std::optional<TestCluster> started;
  {
    ScopedClientSecurity as_cluster({.token = testing::kClusterToken});
    started.emplace(TestCluster::Options{
        .num_workers = 1, .dispatcher_args = dispatcher_args, .worker_args = worker_args});
  }
  TestCluster& cluster = *started;
  const int port =
      std::stoi(testing::WaitForFile(dir.File("dispatcher_http.port"), std::chrono::seconds(10)));
  const int worker_port =
      std::stoi(testing::WaitForFile(dir.File("worker_http.port"), std::chrono::seconds(10)));
  const std::string alpha = "token-of-alpha-0123456789";
  const std::string beta = "token-of-beta-0123456789";

  // Alpha reads 30 elements, beta 20 squares, each in its own job "train".
  for (const auto& [token, dataset] :
       {std::pair{alpha, Dataset::Range(30)}, std::pair{beta, Dataset::Range(20).Map("square")}}) {
    ScopedClientSecurity as_tenant({.token = token});
    std::vector<int64_t> values;
    REQUIRE(testing::ReadToEnd(dataset.ReadFromService({.service = cluster.ServiceUrl(),
                                                        .processing_mode = ProcessingMode::kDistributedEpoch,
                                                        .job_name = "train"}),
                               &values)
                .ok());
  }

  SECTION("/healthz needs no token; the rest refuse none, a wrong one, and a malformed one with 401") {
    const Answer health = Get(port, "/healthz");
    CHECK(health.status == 200);
    CHECK(health.body == "ok\n");
    for (const std::string path : {"/", "/status.json", "/metrics"}) {
      const Answer none = Get(port, path);
      CHECK(none.status == 401);
      CHECK(none.head.find("WWW-Authenticate: Basic realm=\"sluice\", charset=\"UTF-8\"") !=
            std::string::npos);
      CHECK(none.body == absl::StrCat("this port needs a token: ", kHowTo));
      const Answer wrong = Get(port, path, Bearer("token-of-nobody-0123456789"));
      CHECK(wrong.status == 401);
      CHECK(wrong.body == absl::StrCat("the request carried a wrong token: ", kHowTo));
      const Answer malformed = Get(port, path, "Authorization: Digest username=\"x\"\r\n");
      CHECK(malformed.status == 401);
      CHECK(malformed.body == absl::StrCat("the Authorization header is neither Bearer nor Basic: ", kHowTo));
    }
    CHECK(Get(worker_port, "/healthz").status == 200);
    CHECK(Get(worker_port, "/metrics").status == 401);
  }

  SECTION("a tenant's /status.json has its own datasets, jobs and iterations, no throughput or errors") {
    for (const auto& [name, header] :
         {std::pair{std::string("alpha"), Bearer(alpha)}, std::pair{std::string("beta"), Basic(beta)}}) {
      INFO(name);
      const Answer status = Get(port, "/status.json", header);
      REQUIRE(status.status == 200);
      CHECK(status.body.find(absl::StrCat("\"tenant\":\"", name, "\"")) != std::string::npos);
      CHECK(CountOf(Section(status.body, "datasets"), "\"dataset_id\":") == 1);
      CHECK(CountOf(Section(status.body, "jobs"), "\"name\":\"train\"") == 1);
      CHECK(CountOf(Section(status.body, "iterations"), "\"iteration_id\":") == 1);
      CHECK(CountOf(Section(status.body, "workers"), "\"address\":") == 1);
      CHECK(status.body.find("elements_per_second") == std::string::npos);
      CHECK(Section(status.body, "recent_errors") == "[]");
    }
    const Answer all = Get(port, "/status.json", Bearer(testing::kClusterToken));
    REQUIRE(all.status == 200);
    CHECK(all.body.find("\"tenant\":") == std::string::npos);
    CHECK(CountOf(Section(all.body, "datasets"), "\"dataset_id\":") == 2);
    CHECK(CountOf(Section(all.body, "jobs"), "\"name\":\"train\"") == 2);
    CHECK(CountOf(Section(all.body, "iterations"), "\"iteration_id\":") == 2);
    CHECK(CountOf(Section(all.body, "workers"), "\"elements_per_second\":") == 1);
    // The page itself, through the browser's basic auth.
    const Answer page = Get(port, "/", Basic(alpha));
    CHECK(page.status == 200);
    CHECK(page.body.rfind("<!DOCTYPE html>", 0) == 0);
  }

  SECTION("a tenant's /metrics has only the samples labelled with its name") {
    const Answer metrics = Get(port, "/metrics", Bearer(alpha));
    REQUIRE(metrics.status == 200);
    CHECK(Samples(metrics.body, "sluice_tenant_datasets") ==
          std::vector<std::string>{"sluice_tenant_datasets{tenant=\"alpha\"} 1"});
    CHECK(Samples(metrics.body, "sluice_tenant_jobs") ==
          std::vector<std::string>{"sluice_tenant_jobs{tenant=\"alpha\"} 1"});
    CHECK(Samples(metrics.body, "sluice_tenant_iterations") ==
          std::vector<std::string>{"sluice_tenant_iterations{tenant=\"alpha\"} 1"});
    CHECK(metrics.body.find("beta") == std::string::npos);
    CHECK(Samples(metrics.body, "process_").empty());
    CHECK(Samples(metrics.body, "sluice_workers").empty());
    // The worker has no per-tenant metrics: a tenant sees none of it.
    const Answer worker = Get(worker_port, "/metrics", Bearer(alpha));
    CHECK(worker.status == 200);
    CHECK(worker.body.empty());

    const Answer all = Get(port, "/metrics", Bearer(testing::kClusterToken));
    REQUIRE(all.status == 200);
    CHECK(Samples(all.body, "sluice_tenant_jobs") ==
          std::vector<std::string>{"sluice_tenant_jobs{tenant=\"alpha\"} 1",
                                   "sluice_tenant_jobs{tenant=\"beta\"} 1"});
    CHECK(Samples(all.body, "sluice_workers ") == std::vector<std::string>{"sluice_workers 1"});
    CHECK(!Samples(all.body, "process_resident_memory_bytes").empty());
    CHECK(!Samples(Get(worker_port, "/metrics", Bearer(testing::kClusterToken)).body, "process_").empty());
  }
}

}  // namespace
}  // namespace sluice
