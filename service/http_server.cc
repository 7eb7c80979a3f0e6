#include "service/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/thread_pool.h"
#include "service/shared_memory.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Answers are followed by reading what the client still sends, for at most
// this long and this much, before closing: closing with unread bytes makes
// the kernel send a reset, which can destroy the answer before the client
// reads it (a 413 to a client still sending its body, a 431).
constexpr milliseconds kLingerTime{1000};
constexpr size_t kMaxLingerBytes = 64 * 1024;
// Accepts per turn of the loop, so that reading the requests of connections
// accepted a moment ago comes before accepting many more that could evict
// them.
constexpr int kMaxAcceptsPerTurn = 8;
// Out of descriptors, accept() fails at once while the connection waits:
// without a pause the loop would spin.
constexpr milliseconds kAcceptPauseWhenOutOfDescriptors{100};

// A handler's exception would end the process on a pool thread; it is
// logged and answered 500 instead, without its text.
HttpResponse Serve(const HttpHandler& handler, const HttpRequest& request, const std::string& method) {
  try {
    HttpResponse response = handler(request);
    if (response.status >= 100 && response.status <= 999) return response;
    spdlog::error("http: {} {} answered the invalid status {}", method, request.path, response.status);
  } catch (const std::exception& e) {
    spdlog::error("http: {} {} failed: {}", method, request.path, e.what());
  } catch (...) {
    spdlog::error("http: {} {} failed: unknown exception", method, request.path);
  }
  return PlainTextResponse(500, "internal error\n");
}

// Makes closing the connection send a reset, so that the kernel drops the
// unsent rest of an answer at once instead of holding it for a client that
// does not read.
void ResetOnClose(const UniqueFd& fd) {
  const linger abort{1, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
}

std::string PeerName(const sockaddr_storage& address, socklen_t size) {
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), size, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "unknown peer";
  }
  return address.ss_family == AF_INET6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

// For log lines that could come a thousand a second.
class RateLimiter {
 public:
  // Whether to log now; if so, *suppressed is how many were not since.
  bool Allow(int* suppressed) {
    const Clock::time_point now = Clock::now();
    if (last_.has_value() && now - *last_ < std::chrono::seconds(1)) {
      ++suppressed_;
      return false;
    }
    *suppressed = suppressed_;
    suppressed_ = 0;
    last_ = now;
    return true;
  }

 private:
  std::optional<Clock::time_point> last_;
  int suppressed_ = 0;
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpRoutes routes, const std::vector<std::string>& host_names, HttpServerLimits limits)
      : routes_(std::move(routes)), limits_(limits) {
    for (const std::string& name : host_names) allowed_hosts_.insert(absl::AsciiStrToLower(name));
    allowed_hosts_.insert("localhost");
    char hostname[256] = {};
    if (gethostname(hostname, sizeof(hostname) - 1) == 0) {
      allowed_hosts_.insert(absl::AsciiStrToLower(hostname));
    }
  }
  ~Impl() { Stop(); }

  // Binds, then starts the threads; the port bound, or why not.
  absl::StatusOr<int> Listen(const std::string& bind_address, int port);

  void Stop() ABSL_LOCKS_EXCLUDED(stop_mu_);

 private:
  enum class Phase {
    kReading,   // the request head, until request_deadline
    kHandling,  // a handler thread has the request; no deadline
    kWriting,   // the answer, until write_deadline
    kLingering  // answered and shut down for writing; reading what is left
  };
  struct Connection {
    UniqueFd fd;
    std::string peer;
    Phase phase = Phase::kReading;
    Clock::time_point opened;
    Clock::time_point deadline;  // of the phase; unused while kHandling
    std::string head;            // bytes read while kReading
    std::string answer;          // while kWriting
    size_t written = 0;
    size_t lingered_bytes = 0;
  };
  // A handler's answer, for the loop to write.
  struct Finished {
    uint64_t connection_id;
    std::string answer;
  };
  using Connections = std::map<uint64_t, Connection>;

  void Loop();
  int PollTimeoutMs(Clock::time_point now, bool polling_listener) const;
  void ExpireDeadlines(Clock::time_point now);
  void AcceptNew();
  Connections::iterator OldestEvictable();
  // These return false when the connection is to be closed (the caller
  // erases it).
  bool ReadHead(uint64_t id, Connection& connection);
  bool Dispatch(uint64_t id, Connection& connection, ParsedRequestHead parsed);
  bool Answer(Connection& connection, std::string answer);
  bool WriteSome(Connection& connection);
  bool Linger(Connection& connection);
  void TakeFinished();
  void Wake();
  // Closing connections is routine under attack, and a line for each would
  // let the attacker fill the log: at most one line a second.
  void NoteClosed(const Connection& connection, std::string_view why);

  // Constant after construction.
  const HttpRoutes routes_;
  const HttpServerLimits limits_;
  absl::flat_hash_set<std::string> allowed_hosts_;  // lower case; IP addresses are always allowed
  UniqueFd listener_;
  UniqueFd wake_fd_;  // an eventfd: handler threads and Stop() wake the loop

  // Owned by the loop thread (by Stop() once that has been joined).
  Connections connections_;
  uint64_t next_connection_id_ = 0;  // ids grow with age, so connections_ is oldest first
  // Requests handed to handlers_ whose answers the loop has not yet taken:
  // ThreadPool::Schedule would block when its queue is full, so the loop
  // answers 503 before that.
  size_t handler_requests_ = 0;
  Clock::time_point accept_paused_until_;
  RateLimiter closing_log_;
  RateLimiter accept_error_log_;

  std::unique_ptr<ThreadPool> handlers_;
  std::thread loop_thread_;
  std::atomic<bool> stopping_{false};

  absl::Mutex finished_mu_;
  std::vector<Finished> finished_ ABSL_GUARDED_BY(finished_mu_);

  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

absl::StatusOr<int> HttpServer::Impl::Listen(const std::string& bind_address, int port) {
  // getaddrinfo wants "::1", not "[::1]".
  std::string host = bind_address;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const auto cannot_listen = [&](const std::string& why) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", bind_address, ":", port, ": ", why));
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* resolved = nullptr;
  const int gai_error = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &resolved);
  if (gai_error != 0) return cannot_listen(gai_strerror(gai_error));
  int error = 0;
  for (const addrinfo* candidate = resolved; candidate != nullptr && !listener_.valid();
       candidate = candidate->ai_next) {
    UniqueFd sock(socket(candidate->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!sock.valid()) {
      error = errno;
      continue;
    }
    // Only SO_REUSEADDR, so that a restarted daemon gets its port back
    // despite connections in TIME_WAIT; SO_REUSEPORT would let a second
    // server bind the same port and silently share it.
    const int yes = 1;
    const int no = 0;
    setsockopt(sock.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (candidate->ai_family == AF_INET6) setsockopt(sock.get(), IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    if (bind(sock.get(), candidate->ai_addr, candidate->ai_addrlen) != 0 ||
        listen(sock.get(), SOMAXCONN) != 0) {
      error = errno;
      continue;
    }
    listener_ = std::move(sock);
  }
  freeaddrinfo(resolved);
  if (!listener_.valid()) return cannot_listen(error != 0 ? std::strerror(error) : "no address to bind");
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  if (getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &bound_size) != 0) {
    return cannot_listen(std::strerror(errno));
  }
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  wake_fd_ = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_.valid()) return cannot_listen(absl::StrCat("eventfd: ", std::strerror(errno)));
  try {
    handlers_ = std::make_unique<ThreadPool>(limits_.handler_threads);
    loop_thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& e) {
    return cannot_listen(absl::StrCat("cannot start threads: ", e.what()));
  }
  return bound_port;
}

void HttpServer::Impl::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (wake_fd_.valid()) Wake();
  if (loop_thread_.joinable()) loop_thread_.join();
  // Handlers that are running finish; queued ones see stopping_ and return.
  handlers_.reset();
  for (const auto& [id, connection] : connections_) {
    if (connection.phase == Phase::kWriting) ResetOnClose(connection.fd);
  }
  connections_.clear();
  listener_ = UniqueFd();
}

void HttpServer::Impl::NoteClosed(const Connection& connection, std::string_view why) {
  if (int suppressed = 0; closing_log_.Allow(&suppressed)) {
    spdlog::warn(
        "http: closed the connection from {}: {} ({} more closed for a deadline or to make room since "
        "the last message)",
        connection.peer, why, suppressed);
  }
}

void HttpServer::Impl::Wake() {
  const uint64_t one = 1;
  // Can only fail when the counter is near 2^64, which wakes the loop too.
  [[maybe_unused]] const ssize_t written = write(wake_fd_.get(), &one, sizeof(one));
}

void HttpServer::Impl::Loop() {
  std::vector<pollfd> polled;
  std::vector<uint64_t> polled_ids;  // of polled[first_connection...]
  while (!stopping_.load()) {
    const Clock::time_point now = Clock::now();
    ExpireDeadlines(now);
    // At the limit with nobody to evict, new connections wait in the
    // kernel's backlog until one closes.
    const bool polling_listener =
        now >= accept_paused_until_ && (static_cast<int>(connections_.size()) < limits_.max_connections ||
                                        OldestEvictable() != connections_.end());
    polled.clear();
    polled_ids.clear();
    polled.push_back(pollfd{wake_fd_.get(), POLLIN, 0});
    if (polling_listener) polled.push_back(pollfd{listener_.get(), POLLIN, 0});
    const size_t first_connection = polled.size();
    for (const auto& [id, connection] : connections_) {
      if (connection.phase == Phase::kHandling) continue;
      polled.push_back(pollfd{connection.fd.get(),
                              static_cast<short>(connection.phase == Phase::kWriting ? POLLOUT : POLLIN), 0});
      polled_ids.push_back(id);
    }
    if (poll(polled.data(), polled.size(), PollTimeoutMs(now, polling_listener)) < 0) {
      if (errno != EINTR) {
        spdlog::error("http: poll failed: {}", std::strerror(errno));
        std::this_thread::sleep_for(milliseconds(10));
      }
      continue;
    }
    if (polled[0].revents != 0) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t got = read(wake_fd_.get(), &count, sizeof(count));
      TakeFinished();
    }
    // Requests already under way come before new connections.
    for (size_t i = first_connection; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      const auto it = connections_.find(polled_ids[i - first_connection]);
      if (it == connections_.end()) continue;
      Connection& connection = it->second;
      const bool keep = connection.phase == Phase::kReading   ? ReadHead(it->first, connection)
                        : connection.phase == Phase::kWriting ? WriteSome(connection)
                                                              : Linger(connection);
      if (!keep) connections_.erase(it);
    }
    if (polling_listener && polled[1].revents != 0) AcceptNew();
  }
}

int HttpServer::Impl::PollTimeoutMs(Clock::time_point now, bool polling_listener) const {
  std::optional<Clock::time_point> next;
  const auto consider = [&](Clock::time_point when) {
    if (!next.has_value() || when < *next) next = when;
  };
  for (const auto& [id, connection] : connections_) {
    if (connection.phase != Phase::kHandling) consider(connection.deadline);
  }
  if (!polling_listener && now < accept_paused_until_) consider(accept_paused_until_);
  if (!next.has_value()) return -1;
  // Rounded up: waking a little early would only poll again at once.
  return static_cast<int>(std::max<int64_t>(0, std::chrono::ceil<milliseconds>(*next - now).count()));
}

void HttpServer::Impl::ExpireDeadlines(Clock::time_point now) {
  for (auto it = connections_.begin(); it != connections_.end();) {
    Connection& connection = it->second;
    if (connection.phase == Phase::kHandling || connection.deadline > now) {
      ++it;
      continue;
    }
    if (connection.phase == Phase::kReading) {
      // Best effort: one non-blocking send, then the connection goes.
      const std::string timeout = FormatResponse(PlainTextResponse(408, "request timeout\n"), false);
      [[maybe_unused]] const ssize_t sent =
          send(connection.fd.get(), timeout.data(), timeout.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      NoteClosed(connection,
                 absl::StrCat("no complete request within ", limits_.request_deadline.count(), " ms"));
    } else if (connection.phase == Phase::kWriting) {
      ResetOnClose(connection.fd);
      NoteClosed(connection,
                 absl::StrCat("it did not take the answer within ", limits_.write_deadline.count(), " ms"));
    }
    it = connections_.erase(it);
  }
}

HttpServer::Impl::Connections::iterator HttpServer::Impl::OldestEvictable() {
  return std::find_if(connections_.begin(), connections_.end(), [](const auto& entry) {
    return entry.second.phase == Phase::kReading || entry.second.phase == Phase::kLingering;
  });
}

void HttpServer::Impl::AcceptNew() {
  for (int accepted = 0; accepted < kMaxAcceptsPerTurn; ++accepted) {
    const bool full = static_cast<int>(connections_.size()) >= limits_.max_connections;
    if (full && OldestEvictable() == connections_.end()) return;
    sockaddr_storage address{};
    socklen_t address_size = sizeof(address);
    const int fd = accept4(listener_.get(), reinterpret_cast<sockaddr*>(&address), &address_size,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      accept_paused_until_ = Clock::now() + kAcceptPauseWhenOutOfDescriptors;
      if (int suppressed = 0; accept_error_log_.Allow(&suppressed)) {
        spdlog::warn("http: cannot accept a connection: {} ({} more since the last message)",
                     std::strerror(error), suppressed);
      }
      return;
    }
    const Clock::time_point now = Clock::now();
    Connection connection;
    connection.fd = UniqueFd(fd);
    connection.peer = PeerName(address, address_size);
    connection.opened = now;
    connection.deadline = now + limits_.request_deadline;
    if (full) {
      // The oldest slow sender makes room: an honest client sends its
      // request at once, so it is never the oldest for long.
      const auto victim = OldestEvictable();
      NoteClosed(victim->second,
                 absl::StrCat("to make room (", limits_.max_connections, " open), after ",
                              std::chrono::duration_cast<milliseconds>(now - victim->second.opened).count(),
                              " ms without a complete request"));
      connections_.erase(victim);
    }
    const auto [it, inserted] = connections_.emplace(next_connection_id_++, std::move(connection));
    // The request may have come with the connection; if not, poll waits.
    if (!ReadHead(it->first, it->second)) connections_.erase(it);
  }
}

bool HttpServer::Impl::ReadHead(uint64_t id, Connection& connection) {
  // One byte past the limit tells a head that is too large.
  const size_t cap = limits_.max_head_bytes + 1;
  char buffer[4096];
  while (connection.head.size() < cap) {
    const ssize_t got =
        recv(connection.fd.get(), buffer, std::min(sizeof(buffer), cap - connection.head.size()), 0);
    if (got > 0) {
      connection.head.append(buffer, static_cast<size_t>(got));
    } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else if (got == 0 || errno != EINTR) {
      return false;  // the client gave up, or is gone
    }
  }
  const size_t end = FindRequestHeadEnd(connection.head);
  if (end == std::string::npos || end > limits_.max_head_bytes) {
    if (connection.head.size() < cap) return true;  // wait for more
    return Answer(connection, FormatResponse(PlainTextResponse(431, "request head too large\n"), false));
  }
  ParsedRequestHead parsed = ParseRequestHead(std::string_view(connection.head).substr(0, end));
  if (parsed.error_status != 0) {
    return Answer(
        connection,
        FormatResponse(PlainTextResponse(parsed.error_status, std::move(parsed.error_message)), false));
  }
  return Dispatch(id, connection, std::move(parsed));
}

bool HttpServer::Impl::Dispatch(uint64_t id, Connection& connection, ParsedRequestHead parsed) {
  const bool head_only = parsed.method == "HEAD";
  const auto answer = [&](const HttpResponse& response) {
    return Answer(connection, FormatResponse(response, head_only));
  };
  const HttpRequest& request = parsed.request;
  // HTTP/1.0 requests may have no Host: no browser sends those.
  if (const auto host_header = request.headers.find("host"); host_header != request.headers.end()) {
    const std::string host = HostOf(host_header->second);
    if (!IsIpAddress(host) && !allowed_hosts_.contains(host)) {
      return answer(
          PlainTextResponse(421, absl::StrCat("this daemon does not answer to the name '", host,
                                              "' (a guard against DNS rebinding): use its IP address, or "
                                              "add the name to http_host_names\n")));
    }
  }
  const bool healthz = request.path == "/healthz";
  const auto route = routes_.find(request.path);
  if (!healthz && route == routes_.end()) return answer(PlainTextResponse(404, "not found\n"));
  if (parsed.method != "GET" && parsed.method != "HEAD") {
    HttpResponse refused = PlainTextResponse(405, "method not allowed\n");
    refused.headers.emplace_back("Allow", "GET, HEAD");
    return answer(refused);
  }
  // On this thread, so that liveness probes never wait behind handlers.
  if (healthz) return answer(PlainTextResponse(200, "ok\n"));
  if (handler_requests_ >= static_cast<size_t>(limits_.handler_threads) + limits_.max_queued_requests) {
    return answer(PlainTextResponse(503, "busy, try again\n"));
  }
  ++handler_requests_;
  connection.phase = Phase::kHandling;
  std::string().swap(connection.head);
  handlers_->Schedule([this, id, handler = &route->second, queued = std::move(parsed.request),
                       method = std::move(parsed.method), head_only] {
    if (stopping_.load()) return;
    std::string answer = FormatResponse(Serve(*handler, queued, method), head_only);
    {
      absl::MutexLock lock(&finished_mu_);
      finished_.push_back(Finished{id, std::move(answer)});
    }
    Wake();
  });
  return true;
}

void HttpServer::Impl::TakeFinished() {
  std::vector<Finished> finished;
  {
    absl::MutexLock lock(&finished_mu_);
    finished.swap(finished_);
  }
  for (Finished& done : finished) {
    --handler_requests_;
    // Connections waiting for a handler are neither evicted nor expired, so
    // this one is still there.
    const auto it = connections_.find(done.connection_id);
    if (it == connections_.end() || it->second.phase != Phase::kHandling) continue;
    if (!Answer(it->second, std::move(done.answer))) connections_.erase(it);
  }
}

bool HttpServer::Impl::Answer(Connection& connection, std::string answer) {
  std::string().swap(connection.head);
  connection.answer = std::move(answer);
  connection.written = 0;
  connection.phase = Phase::kWriting;
  connection.deadline = Clock::now() + limits_.write_deadline;
  return WriteSome(connection);  // most answers fit in the socket's buffer at once
}

bool HttpServer::Impl::WriteSome(Connection& connection) {
  while (connection.written < connection.answer.size()) {
    const ssize_t sent = send(connection.fd.get(), connection.answer.data() + connection.written,
                              connection.answer.size() - connection.written, MSG_NOSIGNAL);
    if (sent > 0) {
      connection.written += static_cast<size_t>(sent);
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;  // poll says when there is room
    } else if (sent == 0 || errno != EINTR) {
      return false;
    }
  }
  std::string().swap(connection.answer);
  shutdown(connection.fd.get(), SHUT_WR);
  connection.phase = Phase::kLingering;
  connection.deadline = Clock::now() + std::min(kLingerTime, limits_.write_deadline);
  return Linger(connection);
}

bool HttpServer::Impl::Linger(Connection& connection) {
  char buffer[4096];
  while (true) {
    const ssize_t got = recv(connection.fd.get(), buffer, sizeof(buffer), 0);
    if (got > 0) {
      connection.lingered_bytes += static_cast<size_t>(got);
      if (connection.lingered_bytes > kMaxLingerBytes) return false;
    } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else if (got == 0 || errno != EINTR) {
      return false;  // the client has closed too, or is gone
    }
  }
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& bind_address, int port,
                                                              HttpRoutes routes,
                                                              std::vector<std::string> host_names,
                                                              HttpServerLimits limits) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("invalid HTTP port ", port, ": expected 0 to 65535"));
  }
  for (const auto& [path, handler] : routes) {
    if (path.empty() || path.front() != '/') {
      return absl::InvalidArgumentError(absl::StrCat("invalid HTTP path '", path, "': must start with '/'"));
    }
    if (path == "/healthz") {
      return absl::InvalidArgumentError(absl::StrCat("HTTP path ", path, " is built in"));
    }
  }
  if (limits.max_connections < 1 || limits.handler_threads < 1 || limits.max_head_bytes < 1 ||
      limits.request_deadline.count() < 1 || limits.write_deadline.count() < 1) {
    return absl::InvalidArgumentError(
        "invalid HTTP server limits: max_connections, handler_threads, max_head_bytes and the deadlines must "
        "be positive");
  }
  auto impl = std::make_unique<Impl>(std::move(routes), host_names, limits);
  absl::StatusOr<int> bound = impl->Listen(bind_address, port);
  if (!bound.ok()) return bound.status();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl), *bound));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace sluice
