// A small HTTP/1.1 server for a daemon's operational endpoints: /healthz,
// Prometheus /metrics and pages such as the dispatcher's status page. It
// answers GET (and HEAD) on exact paths; it is not for data, which goes over
// gRPC.
//
//   absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Start("0.0.0.0", http_port, {
//       {"/", [](const HttpRequest&) {
//          return HttpResponse{200, "text/html; charset=utf-8", std::string(StatusPageHtml())};
//        }},
//   });
//   if (!http.ok()) return http.status();  // "cannot listen on 0.0.0.0:9090: Address already in use"
//
// Every server serves /healthz ("ok\n"); the routes add the rest (the
// daemon adds /metrics). Other paths are 404, other methods on a known path
// 405. A handler that throws answers 500 and the exception is logged.
//
// Kubernetes probes /healthz for liveness, so no client may keep it from
// being answered (a slowloris sending a header byte a second on a hundred
// connections held every thread of the cpp-httplib server this replaced).
// Hence:
//  - One thread runs an event loop over all sockets, none blocking; no
//    thread ever waits on a client. /healthz is answered on that thread,
//    never queued behind handlers.
//  - A client has request_deadline from its connection to send the whole
//    request head (at most max_head_bytes), and write_deadline to take the
//    answer. One request per connection; the answer closes it.
//  - At most max_connections are open. When that many are open and another
//    arrives, the oldest one still sending its request head is closed to
//    make room, so an honest probe, which sends its request at once, gets
//    in however many slow ones there are.
//  - Handlers run on handler_threads threads with at most
//    max_queued_requests waiting; beyond that a request is answered 503.
//  - The parser is strict (http_request.h): no request bodies, origin-form
//    targets only, HTTP/1.0 and 1.1.
#ifndef SLUICE_SERVICE_HTTP_SERVER_H_
#define SLUICE_SERVICE_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/http_request.h"  // HttpRequest, HttpResponse

namespace sluice {

// Called on one of the server's handler threads, possibly on several at
// once.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// Exact path ("/status.json") to handler.
using HttpRoutes = std::map<std::string, HttpHandler>;

inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// The defaults suit a scraper or two and a browser; tests use small ones.
struct HttpServerLimits {
  // Connections open at once (each holds a descriptor and a buffer of at
  // most max_head_bytes or its answer).
  int max_connections = 256;
  // From accepting a connection until its whole request head has arrived.
  std::chrono::milliseconds request_deadline{5000};
  // From an answer being ready until the client has taken all of it.
  std::chrono::milliseconds write_deadline{5000};
  // The request line and headers together; larger heads are answered 431.
  size_t max_head_bytes = 8192;
  // Threads running route handlers (not /healthz, which the loop answers).
  int handler_threads = 4;
  // Requests waiting for a handler thread; beyond that, 503.
  size_t max_queued_requests = 64;
};

class HttpServer {
 public:
  // Listens on bind_address:port (port 0: a free port, see port()) and
  // serves until Stop(). InvalidArgument for a bad port, a path not
  // starting with '/', /healthz among the routes, or limits that are not
  // positive; Unavailable when the address cannot be bound, naming address,
  // port and the reason.
  //
  // A request whose Host header names neither an IP address, localhost,
  // this machine's host name nor one of `host_names` is answered 421: a
  // web page that rebinds its own DNS name to this address cannot read
  // the status page through a browser.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& bind_address, int port,
                                                           HttpRoutes routes = {},
                                                           std::vector<std::string> host_names = {},
                                                           HttpServerLimits limits = {});

  // Stop()s.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port listened on, the chosen one when Start() was given 0.
  int port() const { return port_; }

  // Closes the listening socket and every connection, lets handlers that
  // are running finish (their answers are dropped) and joins the threads.
  // Idempotent and thread-safe.
  void Stop();

 private:
  class Impl;
  HttpServer(std::unique_ptr<Impl> impl, int port);

  std::unique_ptr<Impl> impl_;
  const int port_;
};

}  // namespace sluice

#endif  // SLUICE_SERVICE_HTTP_SERVER_H_
