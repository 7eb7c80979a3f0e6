#include "service/http_server.h"

#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tests/testing/raw_connection.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace std::chrono_literals;
using testing::Exchange;
using testing::RawConnection;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<HttpServer> StartOrFail(HttpRoutes routes = {}, HttpServerLimits limits = {}) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start("127.0.0.1", 0, std::move(routes), {}, limits);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  return std::move(*server);
}

// The exact bytes of an answer.
std::string Answer(const std::string& status_line, const std::string& body,
                   const std::string& extra_headers = "",
                   const std::string& content_type = "text/plain; charset=utf-8") {
  return absl::StrCat("HTTP/1.1 ", status_line, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n", extra_headers, "\r\n",
                      body);
}
const std::string kHealthy = Answer("200 OK", "ok\n");
constexpr char kGetHealthz[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

TEST_CASE("http server: /healthz, routes, 404, 405, HEAD and 500", "[http]") {
  std::unique_ptr<HttpServer> server = StartOrFail({
      {"/echo",
       [](const HttpRequest& request) {
         const auto name = request.params.find("name");
         const auto agent = request.headers.find("user-agent");
         return HttpResponse{200, "text/html; charset=utf-8",
                             request.path + " " + (name == request.params.end() ? "-" : name->second) + " " +
                                 (agent == request.headers.end() ? "-" : agent->second)};
       }},
      // Routes may hold /metrics: the daemon adds its own.
      {"/metrics",
       [](const HttpRequest&) {
         return HttpResponse{200, kMetricsContentType, "up 1\n"};
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
  CHECK(healthz->get_header_value("Connection") == "close");

  httplib::Result metrics = client.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(metrics->body == "up 1\n");

  httplib::Result echo = client.Get("/echo?name=a%20b&name=c", {{"User-Agent", "probe/1"}});
  REQUIRE(echo);
  CHECK(echo->status == 200);
  CHECK(echo->body == "/echo a b probe/1");  // the first of a repeated parameter
  CHECK(echo->get_header_value("Content-Type") == "text/html; charset=utf-8");

  httplib::Result missing = client.Get("/nope");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  CHECK(missing->body == "not found\n");
  httplib::Result prefix = client.Get("/healthz/more");  // paths are exact
  REQUIRE(prefix);
  CHECK(prefix->status == 404);

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

  // The exact bytes, one request per connection.
  const int port = server->port();
  CHECK(Exchange(port, kGetHealthz) == kHealthy);
  CHECK(Exchange(port, "HEAD /healthz HTTP/1.0\r\n\r\n") ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\nConnection: "
        "close\r\n\r\n");
  CHECK(Exchange(port, "GET /nope HTTP/1.1\r\n\r\n") == Answer("404 Not Found", "not found\n"));
  CHECK(Exchange(port, "POST /healthz HTTP/1.1\r\n\r\n") ==
        Answer("405 Method Not Allowed", "method not allowed\n", "Allow: GET, HEAD\r\n"));
  CHECK(Exchange(port, "DELETE /echo HTTP/1.1\r\nContent-Length: 0\r\n\r\n") ==
        Answer("405 Method Not Allowed", "method not allowed\n", "Allow: GET, HEAD\r\n"));
  CHECK(Exchange(port, "GET /throw HTTP/1.1\r\n\r\n") ==
        Answer("500 Internal Server Error", "internal error\n"));
  CHECK(Exchange(port, "GET /teapot HTTP/1.1\r\n\r\n") == Answer("418 Client Error", ""));
  // A second request on the same connection is not read: the answer closes it.
  CHECK(Exchange(port, std::string(kGetHealthz) + kGetHealthz) == kHealthy);
}

TEST_CASE("http server: extra response headers, and ones that would split the answer are dropped", "[http]") {
  std::unique_ptr<HttpServer> server = StartOrFail({
      {"/private",
       [](const HttpRequest&) {
         return HttpResponse{401,
                             "text/plain; charset=utf-8",
                             "unauthorized\n",
                             {{"WWW-Authenticate", "Basic realm=\"sluice\""},
                              {"X-Injected", "a\r\nSet-Cookie: x=1"},
                              {"Content-Length", "0"},
                              {"Cache-Control", "no-store"}}};
       }},
  });
  CHECK(Exchange(server->port(), "GET /private HTTP/1.1\r\n\r\n") ==
        Answer("401 Unauthorized", "unauthorized\n",
               "WWW-Authenticate: Basic realm=\"sluice\"\r\nCache-Control: no-store\r\n"));
}

TEST_CASE("http server: malformed requests, bodies and large heads are refused", "[http]") {
  std::unique_ptr<HttpServer> server = StartOrFail();
  const int port = server->port();
  CHECK(Exchange(port, "GET /healthz HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello") ==
        Answer("413 Content Too Large", "these endpoints take no request body\n"));
  CHECK(
      Exchange(port, "POST /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n") ==
      Answer("413 Content Too Large", "these endpoints take no request body\n"));
  CHECK(Exchange(port, "GET /healthz HTTP/2.0\r\n\r\n") ==
        Answer("400 Bad Request", "unsupported HTTP version: expected HTTP/1.0 or HTTP/1.1\n"));
  CHECK(Exchange(port, "GET http://127.0.0.1/healthz HTTP/1.1\r\n\r\n") ==
        Answer("400 Bad Request", "request target must be a path starting with '/'\n"));
  CHECK(Exchange(port, "GET /healthz HTTP/1.1\r\nno colon\r\n\r\n") ==
        Answer("400 Bad Request", "malformed header line: expected 'Name: value'\n"));

  // 9000 bytes of head, over the 8192 allowed; the answer still arrives
  // whole although the server did not read all of it.
  const std::string large = "GET /healthz HTTP/1.1\r\nX-Filler: " + std::string(9000 - 37, 'a') + "\r\n\r\n";
  REQUIRE(large.size() == 9000);
  CHECK(Exchange(port, large) == Answer("431 Request Header Fields Too Large", "request head too large\n"));
  // Just under the limit is fine.
  const std::string fits = "GET /healthz HTTP/1.1\r\nX-Filler: " + std::string(8192 - 37, 'a') + "\r\n\r\n";
  REQUIRE(fits.size() == 8192);
  CHECK(Exchange(port, fits) == kHealthy);
}

TEST_CASE("http server: a second server on the same port fails naming it", "[http]") {
  std::unique_ptr<HttpServer> first = StartOrFail();
  absl::StatusOr<std::unique_ptr<HttpServer>> second = HttpServer::Start("127.0.0.1", first->port());
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK(second.status().message() ==
        "cannot listen on 127.0.0.1:" + std::to_string(first->port()) + ": Address already in use");
  // The first still answers.
  CHECK(Exchange(first->port(), kGetHealthz) == kHealthy);
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

TEST_CASE("http server: [::1] is accepted as ::1", "[http]") {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start("[::1]", 0);
  if (!server.ok()) {
    // A container without IPv6 cannot bind it; the message says so.
    CHECK(server.status().message().rfind("cannot listen on [::1]:0: ", 0) == 0);
    return;
  }
  httplib::Client client("::1", (*server)->port());
  httplib::Result healthz = client.Get("/healthz");
  REQUIRE(healthz);
  CHECK(healthz->status == 200);
}

TEST_CASE("http server: bad arguments are InvalidArgument", "[http]") {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start("127.0.0.1", 70000);
  CHECK(server.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(server.status().message() == "invalid HTTP port 70000: expected 0 to 65535");
  server = HttpServer::Start("127.0.0.1", -1);
  CHECK(server.status().message() == "invalid HTTP port -1: expected 0 to 65535");
  server = HttpServer::Start("127.0.0.1", 0, {{"status", nullptr}});
  CHECK(server.status().message() == "invalid HTTP path 'status': must start with '/'");
  server = HttpServer::Start("127.0.0.1", 0, {{"/healthz", nullptr}});
  CHECK(server.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(server.status().message() == "HTTP path /healthz is built in");
  HttpServerLimits no_threads;
  no_threads.handler_threads = 0;
  server = HttpServer::Start("127.0.0.1", 0, {}, {}, no_threads);
  CHECK(server.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(server.status().message() ==
        "invalid HTTP server limits: max_connections, handler_threads, max_head_bytes and the deadlines must "
        "be "
        "positive");
}

TEST_CASE("http server: Stop() returns promptly and frees the port", "[http]") {
  std::unique_ptr<HttpServer> server = StartOrFail();
  const int port = server->port();
  {
    httplib::Client client("127.0.0.1", port);
    httplib::Result healthz = client.Get("/healthz");
    REQUIRE(healthz);
    const Clock::time_point start = Clock::now();
    server->Stop();
    CHECK(SecondsSince(start) < 2.0);
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

TEST_CASE("http server: Stop() with connections open in every phase returns within 2 s", "[http]") {
  HttpServerLimits limits;
  limits.write_deadline = 10000ms;
  std::unique_ptr<HttpServer> server =
      StartOrFail({{"/big",
                    [](const HttpRequest&) {
                      return HttpResponse{200, "text/plain", std::string(8 << 20, 'x')};
                    }}},
                  limits);
  std::vector<std::unique_ptr<RawConnection>> open;
  for (int i = 0; i < 10; ++i) open.push_back(std::make_unique<RawConnection>(server->port()));
  open.push_back(std::make_unique<RawConnection>(server->port()));
  REQUIRE(open.back()->Send("GET /healthz HTTP/1.1\r\n"));  // and never the rest
  open.push_back(std::make_unique<RawConnection>(server->port(), 4096));
  REQUIRE(open.back()->Send("GET /big HTTP/1.1\r\n\r\n"));  // and never reads the answer
  CHECK(Exchange(server->port(), kGetHealthz) == kHealthy);

  const Clock::time_point start = Clock::now();
  server->Stop();
  CHECK(SecondsSince(start) < 2.0);
  for (const std::unique_ptr<RawConnection>& connection : open) CHECK(connection->WaitForClose(1000ms));
}

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
  const std::string refusal =
      "this daemon does not answer to the name 'attacker.example' (a guard against DNS rebinding): use its "
      "IP "
      "address, or add the name to http_host_names\n";
  CHECK(get_as("attacker.example:80") == std::make_pair(421, refusal));
  CHECK(Exchange((*server)->port(), "GET /nope HTTP/1.1\r\nHost: Attacker.Example\r\n\r\n") ==
        Answer("421 Misdirected Request", refusal));
  // No Host at all (HTTP/1.0) is let through.
  CHECK(Exchange((*server)->port(), "GET /healthz HTTP/1.0\r\n\r\n") == kHealthy);
}

TEST_CASE("http server: slowloris and idle connections do not keep /healthz from answering", "[http]") {
  HttpServerLimits limits;
  limits.max_connections = 32;
  limits.request_deadline = 1500ms;
  std::unique_ptr<HttpServer> server = StartOrFail({{"/status.json",
                                                     [](const HttpRequest&) {
                                                       return HttpResponse{200, "application/json", "{}"};
                                                     }}},
                                                   limits);
  const int port = server->port();
  struct Attacker {
    std::unique_ptr<RawConnection> connection;
    Clock::time_point opened;
  };
  std::vector<Attacker> slow;
  std::vector<Attacker> idle;
  for (int i = 0; i < 100; ++i) slow.push_back({std::make_unique<RawConnection>(port), Clock::now()});
  for (int i = 0; i < 50; ++i) idle.push_back({std::make_unique<RawConnection>(port), Clock::now()});
  for (const Attacker& attacker : slow) REQUIRE(attacker.connection->connected());
  for (const Attacker& attacker : idle) REQUIRE(attacker.connection->connected());

  // One byte of a request line that never ends, on each connection every 300 ms.
  std::atomic<bool> done{false};
  std::thread dripper([&] {
    const std::string line = "GET /x HTTP/1.1\r\n";
    for (size_t next = 0; !done.load(); ++next) {
      for (Attacker& attacker : slow) attacker.connection->Send(line.substr(next % line.size(), 1));
      for (int wait = 0; wait < 30 && !done.load(); ++wait) std::this_thread::sleep_for(10ms);
    }
  });
  struct Joiner {
    std::atomic<bool>& done;
    std::thread& thread;
    ~Joiner() {
      done = true;
      thread.join();
    }
  } joiner{done, dripper};

  for (int i = 0; i < 20; ++i) {
    INFO("probe " << i);
    const Clock::time_point start = Clock::now();
    CHECK(Exchange(port, kGetHealthz, 1000ms) == kHealthy);
    CHECK(SecondsSince(start) < 1.0);
    std::this_thread::sleep_for(20ms);
  }
  CHECK(Exchange(port, "GET /status.json HTTP/1.1\r\nHost: localhost\r\n\r\n", 1000ms) ==
        Answer("200 OK", "{}", "", "application/json"));

  // Every attacker is closed, to make room or at its deadline.
  for (std::vector<Attacker>* attackers : {&slow, &idle}) {
    for (size_t i = 0; i < attackers->size(); ++i) {
      const Attacker& attacker = (*attackers)[i];
      INFO((attackers == &slow ? "slow " : "idle ") << i);
      const auto left = std::chrono::duration_cast<milliseconds>(attacker.opened + limits.request_deadline +
                                                                 1000ms - Clock::now());
      CHECK(attacker.connection->WaitForClose(std::max(left, 0ms)));
    }
  }

  // A slow sender alone: answered 408 at its deadline, not before.
  RawConnection lone(port);
  const Clock::time_point start = Clock::now();
  bool closed = false;
  for (int byte = 0; byte < 20 && !closed; ++byte) {
    lone.Send(std::string(1, "GET /x HTTP/1.1\r\n"[byte % 17]));
    closed = lone.WaitForClose(300ms);
  }
  const double elapsed = SecondsSince(start);
  CHECK(closed);
  CHECK(elapsed >= 1.45);
  CHECK(elapsed < 2.5);
  const RawConnection::Received received = lone.ReadToEnd(1000ms);
  CHECK(received.closed);
  CHECK(received.bytes == Answer("408 Request Timeout", "request timeout\n"));
}

TEST_CASE("http server: a full handler queue answers 503 while /healthz still answers", "[http]") {
  absl::Notification release;
  std::atomic<int> entered{0};
  HttpServerLimits limits;
  limits.handler_threads = 1;
  limits.max_queued_requests = 1;
  std::unique_ptr<HttpServer> server =
      StartOrFail({{"/block",
                    [&](const HttpRequest&) {
                      ++entered;
                      release.WaitForNotificationWithTimeout(absl::Seconds(10));
                      return HttpResponse{200, "text/plain", "released\n"};
                    }}},
                  limits);
  // Releases the handlers even when a check below fails, before the server
  // is destroyed.
  struct Releaser {
    absl::Notification& release;
    ~Releaser() {
      if (!release.HasBeenNotified()) release.Notify();
    }
  } releaser{release};
  const int port = server->port();
  constexpr char kGetBlock[] = "GET /block HTTP/1.1\r\n\r\n";

  RawConnection running(port);
  REQUIRE(running.Send(kGetBlock));
  const Clock::time_point start = Clock::now();
  while (entered.load() == 0 && SecondsSince(start) < 5.0) std::this_thread::sleep_for(1ms);
  REQUIRE(entered.load() == 1);
  RawConnection queued(port);
  REQUIRE(queued.Send(kGetBlock));
  CHECK(Exchange(port, kGetHealthz) == kHealthy);
  CHECK(Exchange(port, kGetBlock) == Answer("503 Service Unavailable", "busy, try again\n"));
  CHECK(Exchange(port, kGetHealthz) == kHealthy);

  release.Notify();
  const std::string released = Answer("200 OK", "released\n", "", "text/plain");
  CHECK(running.ReadToEnd(2000ms).bytes == released);
  CHECK(queued.ReadToEnd(2000ms).bytes == released);
  CHECK(entered.load() == 2);
}

TEST_CASE("http server: a client that does not read its answer is closed at the write deadline", "[http]") {
  HttpServerLimits limits;
  limits.write_deadline = 1000ms;
  constexpr size_t kBigBytes = 8 << 20;
  std::unique_ptr<HttpServer> server =
      StartOrFail({{"/big",
                    [](const HttpRequest&) {
                      return HttpResponse{200, "text/plain", std::string(kBigBytes, 'x')};
                    }}},
                  limits);
  const int port = server->port();
  // A small receive buffer, so that the answer cannot all sit in buffers.
  RawConnection reader(port, 4096);
  const Clock::time_point start = Clock::now();
  REQUIRE(reader.Send("GET /big HTTP/1.1\r\n\r\n"));
  for (int i = 0; i < 4; ++i) {
    CHECK(Exchange(port, kGetHealthz, 1000ms) == kHealthy);
    std::this_thread::sleep_for(100ms);
  }
  CHECK_FALSE(reader.WaitForClose(std::chrono::duration_cast<milliseconds>(start + 900ms - Clock::now())));
  CHECK(reader.WaitForClose(2000ms));
  const double closed_after = SecondsSince(start);
  CHECK(closed_after >= 0.99);
  CHECK(closed_after < 2.0);
  const RawConnection::Received received = reader.ReadToEnd(1000ms);
  CHECK(received.closed);
  CHECK(received.bytes.size() < kBigBytes);
  CHECK(Exchange(port, kGetHealthz) == kHealthy);
}

}  // namespace
}  // namespace sluice
