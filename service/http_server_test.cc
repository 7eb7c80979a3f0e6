#include "service/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <string>

#include "service/metrics.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<HttpServer> StartOrFail(HttpRoutes routes = {}) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start("127.0.0.1", 0, std::move(routes));
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  return std::move(*server);
}

TEST_CASE("http server: /healthz, /metrics, routes, 404, 405 and 500", "[http]") {
  ProcessMetrics().AddCounter("sluice_http_server_test_total", "Test counter.").Get().Increment(7);
  std::unique_ptr<HttpServer> server = StartOrFail({
      {"/echo",
       [](const HttpRequest& request) {
         const auto it = request.params.find("name");
         return HttpResponse{200, "text/html; charset=utf-8",
                             request.path + " " + (it == request.params.end() ? "-" : it->second)};
       }},
      {"/throw", [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("boom"); }},
      {"/teapot",
       [](const HttpRequest&) {
         return HttpResponse{418, "text/plain; charset=utf-8", ""};
       }},
  });
  httplib::Client client("127.0.0.1", server->port());

  httplib::Result healthz = client.Get("/healthz");
  REQUIRE(healthz);
  CHECK(healthz->status == 200);
  CHECK(healthz->body == "ok\n");
  CHECK(healthz->get_header_value("Content-Type") == "text/plain; charset=utf-8");

  httplib::Result metrics = client.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(metrics->body.find("# HELP sluice_http_server_test_total Test counter.\n"
                           "# TYPE sluice_http_server_test_total counter\n"
                           "sluice_http_server_test_total 7\n") != std::string::npos);
  CHECK(metrics->body.find("# TYPE process_cpu_seconds_total counter\n") != std::string::npos);

  httplib::Result echo = client.Get("/echo?name=a%20b&name=c");
  REQUIRE(echo);
  CHECK(echo->status == 200);
  CHECK(echo->body == "/echo a b");  // the first of a repeated parameter
  CHECK(echo->get_header_value("Content-Type") == "text/html; charset=utf-8");

  httplib::Result missing = client.Get("/nope");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  CHECK(missing->body == "not found\n");
  httplib::Result prefix = client.Get("/healthz/more");  // paths are exact
  REQUIRE(prefix);
  CHECK(prefix->status == 404);

  httplib::Result post = client.Post("/healthz", "x", "text/plain");
  REQUIRE(post);
  CHECK(post->status == 405);
  CHECK(post->get_header_value("Allow") == "GET, HEAD");

  httplib::Result head = client.Head("/healthz");
  REQUIRE(head);
  CHECK(head->status == 200);
  CHECK(head->body.empty());

  httplib::Result thrown = client.Get("/throw");
  REQUIRE(thrown);
  CHECK(thrown->status == 500);
  CHECK(thrown->body == "internal error\n");
  CHECK_FALSE(thrown->has_header("EXCEPTION_WHAT"));

  // A handler's own error status and empty body are kept.
  httplib::Result teapot = client.Get("/teapot");
  REQUIRE(teapot);
  CHECK(teapot->status == 418);
  CHECK(teapot->body.empty());
}

TEST_CASE("http server: a second server on the same port fails naming it", "[http]") {
  std::unique_ptr<HttpServer> first = StartOrFail();
  absl::StatusOr<std::unique_ptr<HttpServer>> second = HttpServer::Start("127.0.0.1", first->port());
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK(second.status().message() ==
        "cannot listen on 127.0.0.1:" + std::to_string(first->port()) + ": Address already in use");
  // The first still answers.
  httplib::Client client("127.0.0.1", first->port());
  httplib::Result healthz = client.Get("/healthz");
  REQUIRE(healthz);
  CHECK(healthz->status == 200);
}

TEST_CASE("http server: an address that cannot be bound is named with the reason", "[http]") {
  // TEST-NET-1, assigned to no interface here.
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start("192.0.2.1", 9090);
  CHECK(server.status().code() == absl::StatusCode::kUnavailable);
  CHECK(server.status().message() == "cannot listen on 192.0.2.1:9090: Cannot assign requested address");
  // The resolver's words vary (no such name, or no DNS at all), the start does not.
  server = HttpServer::Start("no-such-host.invalid", 9090);
  CHECK(server.status().code() == absl::StatusCode::kUnavailable);
  CHECK(server.status().message().rfind("cannot listen on no-such-host.invalid:9090: ", 0) == 0);
}

TEST_CASE("http server: bad arguments are InvalidArgument", "[http]") {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start("127.0.0.1", 70000);
  CHECK(server.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(server.status().message() == "invalid HTTP port 70000: expected 0 to 65535");
  server = HttpServer::Start("127.0.0.1", 0, {{"status", nullptr}});
  CHECK(server.status().message() == "invalid HTTP path 'status': must start with '/'");
  server = HttpServer::Start("127.0.0.1", 0, {{"/metrics", nullptr}});
  CHECK(server.status().message() == "HTTP path /metrics is built in");
}

TEST_CASE("http server: Stop() returns promptly and frees the port", "[http]") {
  std::unique_ptr<HttpServer> server = StartOrFail();
  const int port = server->port();
  {
    // A keep-alive client that stays connected after its request.
    httplib::Client client("127.0.0.1", port);
    client.set_keep_alive(true);
    httplib::Result healthz = client.Get("/healthz");
    REQUIRE(healthz);
    const Clock::time_point start = Clock::now();
    server->Stop();
    CHECK(SecondsSince(start) < kHttpKeepAliveSeconds + 1.0);
  }
  server->Stop();  // again: nothing
  httplib::Client client("127.0.0.1", port);
  CHECK_FALSE(client.Get("/healthz"));

  // The port can be had again at once, despite connections in TIME_WAIT.
  absl::StatusOr<std::unique_ptr<HttpServer>> again = HttpServer::Start("127.0.0.1", port);
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK((*again)->port() == port);
  const Clock::time_point start = Clock::now();
  again->reset();  // the destructor stops it
  CHECK(SecondsSince(start) < 1.0);
}

TEST_CASE("http server: a silent client neither blocks others nor holds Stop()", "[http]") {
  std::unique_ptr<HttpServer> server = StartOrFail();
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(silent >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(silent, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(send(silent, "GET /healthz HTTP/1.1\r\n", 23, 0) == 23);  // and never the rest

  httplib::Client client("127.0.0.1", server->port());
  httplib::Result healthz = client.Get("/healthz");
  REQUIRE(healthz);
  CHECK(healthz->status == 200);

  const Clock::time_point start = Clock::now();
  server->Stop();
  CHECK(SecondsSince(start) < kHttpIoTimeoutSeconds + 1.0);
  close(silent);
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST_CASE("http server: a Host that names another site is refused (DNS rebinding)", "[http]") {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start("127.0.0.1", 0, {}, {"Sluice-Dispatcher.example"});
  REQUIRE(server.ok());
  httplib::Client client("127.0.0.1", (*server)->port());
  auto get_as = [&](const std::string& host) {
    httplib::Result result = client.Get("/healthz", {{"Host", host}});
    REQUIRE(result);
    return std::make_pair(result->status, result->body);
  };
  for (const std::string& host :
       {std::string("127.0.0.1:8080"), std::string("[::1]:9"), std::string("10.1.2.3"),
        std::string("localhost:80"), std::string("sluice-dispatcher.example:443")}) {
    INFO(host);
    CHECK(get_as(host) == std::make_pair(200, std::string("ok\n")));
  }
  CHECK(get_as("attacker.example:80") ==
        std::make_pair(421, std::string("this daemon does not answer to the name 'attacker.example' (a guard "
                                        "against DNS rebinding): use its IP address, or add the name to "
                                        "http_host_names\n")));
}

}  // namespace
}  // namespace sluice
