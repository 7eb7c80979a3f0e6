#include "service/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/thread_pool.h"
#include "service/metrics.h"

namespace sluice {
namespace {

constexpr char kPlainText[] = "text/plain; charset=utf-8";

HttpResponse Serve(const HttpHandler& handler, const HttpRequest& request) {
  // An exception would otherwise reach httplib, which answers 500 with the
  // exception's text in a header.
  try {
    return handler(request);
  } catch (const std::exception& e) {
    spdlog::error("http: GET {} failed: {}", request.path, e.what());
  } catch (...) {
    spdlog::error("http: GET {} failed: unknown exception", request.path);
  }
  return HttpResponse{500, kPlainText, "internal error\n"};
}

// Only SO_REUSEADDR, so that a restarted daemon gets its port back despite
// connections in TIME_WAIT. httplib's default adds SO_REUSEPORT, under which
// a second server on the same port would bind and silently share it.
void SetSocketOptions(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// httplib's ThreadPool queues connections without bound, so a flood of idle
// connections would pile up open sockets until the process runs out of
// descriptors. Here a full queue makes the accept loop wait: the rest wait
// in the kernel's listen backlog, and the process holds at most the threads
// plus kMaxQueuedConnections.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  explicit BoundedTaskQueue(int threads)
      : pool_(std::make_unique<ThreadPool>(threads, kMaxQueuedConnections)) {}

  void enqueue(std::function<void()> task) override { pool_->Schedule(std::move(task)); }
  // Queued connections are still served (each closes its socket when its
  // task runs), then the threads are joined.
  void shutdown() override { pool_.reset(); }

 private:
  static constexpr size_t kMaxQueuedConnections = 64;
  // Only httplib's accept thread calls enqueue and shutdown.
  std::unique_ptr<ThreadPool> pool_;
};

// The host of a Host header ("name:port", "[v6]:port"), lower case.
std::string HostOf(std::string header) {
  if (!header.empty() && header.front() == '[') {
    const size_t close = header.find(']');
    header = header.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  } else if (const size_t colon = header.find(':');
             colon != std::string::npos && header.find(':', colon + 1) == std::string::npos) {
    header.resize(colon);
  }
  return absl::AsciiStrToLower(header);
}

bool IsIpAddress(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpRoutes routes, std::vector<std::string> host_names) : routes_(std::move(routes)) {
    for (const std::string& name : host_names) allowed_hosts_.insert(absl::AsciiStrToLower(name));
    allowed_hosts_.insert("localhost");
    char hostname[256] = {};
    if (gethostname(hostname, sizeof(hostname) - 1) == 0)
      allowed_hosts_.insert(absl::AsciiStrToLower(hostname));
    server_.new_task_queue = [] { return new BoundedTaskQueue(kHttpServerThreads); };
    server_.set_socket_options(SetSocketOptions);
    server_.set_payload_max_length(kMaxHttpRequestBodyBytes);
    server_.set_read_timeout(kHttpIoTimeoutSeconds, 0);
    server_.set_write_timeout(kHttpIoTimeoutSeconds, 0);
    server_.set_keep_alive_timeout(kHttpKeepAliveSeconds);
    server_.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return Route(req, res); });
    server_.set_error_handler(
        httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
          if (res.status != 404 || !res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          res.set_content("not found\n", kPlainText);
          return httplib::Server::HandlerResponse::Handled;
        }));
  }
  ~Impl() { Stop(); }

  // The port bound, or why not.
  absl::StatusOr<int> Listen(const std::string& bind_address, int port) {
    // httplib resolves the host with getaddrinfo, which wants "::1", not "[::1]".
    std::string host = bind_address;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const auto cannot_listen = [&](const std::string& why) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", bind_address, ":", port, ": ", why));
    };
    // httplib says neither why a name did not resolve nor why a bind
    // failed. The first is asked again here, as httplib asks; for the
    // second, the failing call leaves errno set.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* resolved = nullptr;
    const int gai_error = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &resolved);
    if (gai_error != 0) return cannot_listen(gai_strerror(gai_error));
    freeaddrinfo(resolved);
    errno = 0;
    int bound = -1;
    if (port == 0) {
      bound = server_.bind_to_any_port(host);
    } else if (server_.bind_to_port(host, port)) {
      bound = port;
    }
    if (bound <= 0) {
      const int error = errno;
      return cannot_listen(error != 0 ? std::strerror(error) : "bind failed");
    }
    thread_ = std::thread([this] {
      if (!server_.listen_after_bind()) spdlog::error("http: the server stopped accepting connections");
      listen_returned_ = true;
    });
    // httplib's stop() does nothing before the accept loop has begun, so
    // Stop() is only safe once it has. This waits for our own thread only.
    while (!server_.is_running() && !listen_returned_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return bound;
  }

  void Stop() ABSL_LOCKS_EXCLUDED(stop_mu_) {
    absl::MutexLock lock(&stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  httplib::Server::HandlerResponse Route(const httplib::Request& req, httplib::Response& res) {
    // HTTP/1.0 requests may have no Host: no browser sends those.
    if (req.has_header("Host")) {
      const std::string host = HostOf(req.get_header_value("Host"));
      if (!IsIpAddress(host) && !allowed_hosts_.contains(host)) {
        res.status = 421;
        res.set_content(absl::StrCat("this daemon does not answer to the name '", host,
                                     "' (a guard against DNS rebinding): use its IP address, or add the name "
                                     "to http_host_names\n"),
                        kPlainText);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    const auto it = routes_.find(req.path);
    // Unhandled ends in httplib's 404, since no route is registered with it.
    if (it == routes_.end()) return httplib::Server::HandlerResponse::Unhandled;
    if (req.method != "GET" && req.method != "HEAD") {
      res.status = 405;
      res.set_header("Allow", "GET, HEAD");
      res.set_content("method not allowed\n", kPlainText);
      return httplib::Server::HandlerResponse::Handled;
    }
    HttpRequest request{req.path, {}};
    for (const auto& [key, value] : req.params) request.params.emplace(key, value);
    const HttpResponse response = Serve(it->second, request);
    res.status = response.status;
    res.set_content(response.body, response.content_type);
    return httplib::Server::HandlerResponse::Handled;
  }

  const HttpRoutes routes_;
  // Lower case; IP addresses are always allowed.
  absl::flat_hash_set<std::string> allowed_hosts_;
  httplib::Server server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};

  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& bind_address, int port,
                                                              HttpRoutes routes,
                                                              std::vector<std::string> host_names) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("invalid HTTP port ", port, ": expected 0 to 65535"));
  }
  for (const auto& [path, handler] : routes) {
    if (path.empty() || path.front() != '/') {
      return absl::InvalidArgumentError(absl::StrCat("invalid HTTP path '", path, "': must start with '/'"));
    }
    if (path == "/metrics" || path == "/healthz") {
      return absl::InvalidArgumentError(absl::StrCat("HTTP path ", path, " is built in"));
    }
  }
  routes["/metrics"] = [](const HttpRequest&) {
    return HttpResponse{200, kMetricsContentType, ProcessMetrics().Render()};
  };
  routes["/healthz"] = [](const HttpRequest&) { return HttpResponse{200, kPlainText, "ok\n"}; };
  auto impl = std::make_unique<Impl>(std::move(routes), std::move(host_names));
  absl::StatusOr<int> bound = impl->Listen(bind_address, port);
  if (!bound.ok()) return bound.status();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl), *bound));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace sluice
