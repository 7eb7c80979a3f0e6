// A small HTTP server for a daemon's operational endpoints: Prometheus
// /metrics, /healthz, and pages such as the dispatcher's status page. It
// answers GET (and HEAD) on exact paths, on a few threads of its own; it is
// not for data, which goes over gRPC.
//
//   absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Start("0.0.0.0", http_port, {
//       {"/", [](const HttpRequest&) {
//          return HttpResponse{200, "text/html; charset=utf-8", std::string(StatusPageHtml())};
//        }},
//   });
//   if (!http.ok()) return http.status();  // "cannot listen on 0.0.0.0:9090: Address already in use"
//
// Every server also serves /metrics (ProcessMetrics(), text format 0.0.4)
// and /healthz ("ok\n"). Other paths are 404, other methods on a known path
// 405. A handler that throws answers 500 and the exception is logged.
//
// A client cannot hold the server: requests are read and answers written
// with timeouts, bodies are capped, and idle keep-alive connections are
// closed after a couple of seconds.
#ifndef SLUICE_SERVICE_HTTP_SERVER_H_
#define SLUICE_SERVICE_HTTP_SERVER_H_

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice {

struct HttpRequest {
  std::string path;
  // Query parameters; the first value of a repeated one.
  std::map<std::string, std::string> params;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Called on one of the server's threads, possibly on several at once.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// Exact path ("/status.json") to handler.
using HttpRoutes = std::map<std::string, HttpHandler>;

inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";
// Threads answering requests: a scraper or two and a browser.
inline constexpr int kHttpServerThreads = 4;
// The endpoints take no bodies; this bounds what a client can make us read.
inline constexpr size_t kMaxHttpRequestBodyBytes = 64 * 1024;
// How long a client may take to send a request or read an answer, and how
// long an idle keep-alive connection is kept. Stop() waits at most about
// this long for a request in progress.
inline constexpr int kHttpIoTimeoutSeconds = 2;
inline constexpr int kHttpKeepAliveSeconds = 2;

class HttpServer {
 public:
  // Listens on bind_address:port (port 0: a free port, see port()) and
  // serves until Stop(). InvalidArgument for a bad port, a path not
  // starting with '/', or one of the built-in paths; Unavailable when the
  // address cannot be bound, naming address, port and the reason.
  //
  // A request whose Host header names neither an IP address, localhost,
  // this machine's host name nor one of `host_names` is answered 421: a
  // web page that rebinds its own DNS name to this address cannot read
  // the status page through a browser.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& bind_address, int port,
                                                           HttpRoutes routes = {},
                                                           std::vector<std::string> host_names = {});

  // Stop()s.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port listened on, the chosen one when Start() was given 0.
  int port() const { return port_; }

  // Closes the listening socket, lets requests in progress finish (within
  // the timeouts above) and joins the threads. Idempotent and thread-safe.
  void Stop();

 private:
  class Impl;
  HttpServer(std::unique_ptr<Impl> impl, int port);

  std::unique_ptr<Impl> impl_;
  const int port_;
};

}  // namespace sluice

#endif  // SLUICE_SERVICE_HTTP_SERVER_H_
