#include "worker/shared_memory_server.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/element_wire.h"
#include "service/message_bytes.h"

namespace sluice::worker {
namespace {

// How long an accepted connection has to send its hello.
constexpr int kHelloTimeoutMs = 2000;
// How often the loop looks for offers past their lifetime, and, while
// connections wait for their hello, for those past kHelloTimeoutMs.
constexpr int kLoopTickMs = 1000;
constexpr int kPendingTickMs = 100;
// Connections waiting for their hello; more are closed at once.
constexpr size_t kMaxPendingConnections = 64;
// Of them, from one uid: one user's silent connections leave room for
// root's and the others'.
constexpr size_t kMaxPendingPerUid = 16;
// At most one warning of refusals a second, with the count of the rest: a
// connect loop once wrote 150,000 lines in 5 s.
constexpr absl::Duration kWarningInterval = absl::Seconds(1);

// The connection's peer, or nullopt when the kernel does not say.
std::optional<ucred> PeerOf(int fd) {
  ucred peer{};
  socklen_t length = sizeof(peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) return std::nullopt;
  return peer;
}

// Compares without stopping at the first difference.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryServer>> SharedMemoryServer::Start(int64_t max_mapped_bytes) {
  std::string name;
  absl::StatusOr<UniqueFd> listener = ListenAbstract(&name);
  if (!listener.ok()) return listener.status();
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  return std::unique_ptr<SharedMemoryServer>(new SharedMemoryServer(
      *std::move(listener), std::move(name), UniqueFd(wake[0]), UniqueFd(wake[1]), max_mapped_bytes));
}

SharedMemoryServer::SharedMemoryServer(UniqueFd listener, std::string name, UniqueFd wake_read,
                                       UniqueFd wake_write, int64_t max_mapped_bytes)
    : listener_(std::move(listener)),
      name_(std::move(name)),
      host_id_(HostId()),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      max_mapped_bytes_(max_mapped_bytes) {
  thread_ = std::thread([this] { Loop(); });
}

SharedMemoryServer::~SharedMemoryServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  const char byte = 0;
  (void)!write(wake_write_.get(), &byte, 1);
  thread_.join();
}

absl::StatusOr<proto::OpenSharedMemoryResponse> SharedMemoryServer::Offer(const std::string& host_id,
                                                                          const std::string& client) {
  if (host_id_.empty() || host_id != host_id_) {
    return absl::FailedPreconditionError(
        "the reader is on another host than this worker, or in another network namespace");
  }
  absl::MutexLock lock(&mu_);
  DropExpiredOffers();
  if (static_cast<int>(sessions_.size()) >= kMaxSharedMemorySessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this worker has ", kMaxSharedMemorySessions, " shared-memory sessions open, its most"));
  }
  int pending = 0;
  for (const auto& [id, session] : sessions_)
    pending += session.region == nullptr && session.client == client;
  if (pending >= kMaxPendingSharedMemoryOffersPerClient) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this worker holds ", kMaxPendingSharedMemoryOffersPerClient,
        " shared-memory offers of this client that no reader has taken up, its most per client (each "
        "lapses ",
        absl::FormatDuration(kSharedMemoryOfferLifetime), " after it was made): this reader reads over TCP"));
  }
  uint64_t id = 0;
  do {
    const std::string bytes = RandomBytes(sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  } while (id == 0 || sessions_.contains(id));
  Session& session = sessions_[id];
  session.secret = RandomBytes(kSharedMemorySecretBytes);
  session.client = client;
  session.offered = absl::Now();
  proto::OpenSharedMemoryResponse response;
  response.set_socket_name(name_);
  response.set_session(id);
  response.set_secret(session.secret);
  return response;
}

std::shared_ptr<SharedRegion> SharedMemoryServer::Region(uint64_t session, const std::string& secret) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end() || !SameSecret(secret, it->second.secret)) return nullptr;
  return it->second.region;
}

int SharedMemoryServer::connected_sessions() {
  absl::MutexLock lock(&mu_);
  int connected = 0;
  for (const auto& [id, session] : sessions_) connected += session.region != nullptr ? 1 : 0;
  return connected;
}

int64_t SharedMemoryServer::MappedBytesLocked() const {
  int64_t mapped = 0;
  for (const auto& [id, session] : sessions_) {
    mapped += (session.region != nullptr ? session.region->size() : 0) + session.lent_bytes;
  }
  return mapped;
}

void SharedMemoryServer::DropExpiredOffers() {
  const absl::Time now = absl::Now();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.region == nullptr && now - it->second.offered > kSharedMemoryOfferLifetime) {
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

void SharedMemoryServer::Loop() {
  while (true) {
    // The worker's pipelines may take its address space to its limit
    // (max_memory_bytes): an allocation failing here must not end the
    // process, only this turn.
    try {
      if (!Turn()) return;
    } catch (const std::exception& e) {
      spdlog::warn("shared memory: {}; trying again", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

bool SharedMemoryServer::Turn() {
  std::vector<pollfd> polled = {{.fd = wake_read_.get(), .events = POLLIN, .revents = 0},
                                {.fd = listener_.get(), .events = POLLIN, .revents = 0}};
  std::vector<uint64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    DropExpiredOffers();
    for (const auto& [id, session] : sessions_) {
      if (!session.socket.valid()) continue;
      polled.push_back({.fd = session.socket.get(), .events = POLLIN, .revents = 0});
      ids.push_back(id);
    }
  }
  // Connections that have not said their hello yet: waited for here, with
  // the rest, so that a silent one holds up no other reader.
  const absl::Time now = absl::Now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->since > absl::Milliseconds(kHelloTimeoutMs)) {
      Warn(absl::StrCat("a connection said no hello within ", kHelloTimeoutMs, " ms; closed"));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (const Pending& p : pending_)
    polled.push_back({.fd = p.connection.get(), .events = POLLIN, .revents = 0});
  const size_t first_pending = 2 + ids.size();
  if (poll(polled.data(), polled.size(), pending_.empty() ? kLoopTickMs : kPendingTickMs) < 0 &&
      errno != EINTR) {
    spdlog::error("shared memory: poll failed ({}); no new sessions", std::strerror(errno));
    return false;
  }
  for (size_t i = 2; i < first_pending; ++i) {
    if (polled[i].revents == 0) continue;
    char byte = 0;
    // A reader says nothing after its hello: readable means it hung up.
    if (recv(polled[i].fd, &byte, 1, MSG_DONTWAIT) > 0) continue;
    // Its leases' tensors go after the lock: freeing buffers (a task's heap,
    // even) must not hold up other sessions' requests.
    decltype(sessions_)::node_type ended;
    {
      absl::MutexLock lock(&mu_);
      ended = sessions_.extract(ids[i - 2]);
    }
    spdlog::info("shared memory session {:016x} closed: its reader hung up", ids[i - 2]);
  }
  // Hellos that came, in reverse so that erasing keeps the indices.
  for (size_t i = polled.size(); i-- > first_pending;) {
    if (polled[i].revents == 0) continue;
    UniqueFd connection = std::move(pending_[i - first_pending].connection);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i - first_pending));
    Handshake(std::move(connection));
  }
  if (polled[1].revents & POLLIN) Accept();
  return true;
}

void SharedMemoryServer::Accept() {
  while (true) {
    UniqueFd connection(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection.valid()) {
      // Out of descriptors, say: the listener stays readable, so wait a
      // little rather than spin.
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("shared memory: accept failed: {}", std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      return;
    }
    // The abstract namespace has no file permissions: only this user (or
    // root) may hand this worker memory, and another is refused before it
    // can hold a slot.
    const std::optional<ucred> peer = PeerOf(connection.get());
    if (!peer.has_value() || (peer->uid != getuid() && peer->uid != 0)) {
      Warn(absl::StrCat("refused a connection from uid ",
                        peer.has_value() ? static_cast<int64_t>(peer->uid) : -1,
                        ": shared memory is for readers running as uid ", getuid()));
      continue;  // closed
    }
    const size_t from_uid =
        std::count_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.uid == peer->uid; });
    if (pending_.size() >= kMaxPendingConnections || from_uid >= kMaxPendingPerUid) {
      Warn(absl::StrCat("closed a connection from uid ", peer->uid, ": ", from_uid,
                        " of its connections (and ", pending_.size(), " in all) have not said their hello"));
      continue;
    }
    pending_.push_back({std::move(connection), absl::Now(), peer->uid});
  }
}

void SharedMemoryServer::Handshake(UniqueFd connection) {
  // Checked at accept; the pid is for the log.
  const ucred peer = PeerOf(connection.get()).value_or(ucred{});
  absl::Status verdict;
  SharedMemoryHello hello;
  UniqueFd memfd;
  if (verdict.ok()) verdict = ReceiveHello(connection.get(), /*timeout_ms=*/0, &hello, &memfd);
  if (verdict.ok()) {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(hello.session);
    if (it == sessions_.end() || it->second.region != nullptr ||
        !SameSecret(hello.secret, it->second.secret)) {
      verdict = absl::PermissionDeniedError(
          "the hello names no session offered to it (unknown, already connected, expired, or a wrong "
          "secret)");
      // One guess per offer.
      if (it != sessions_.end() && it->second.region == nullptr) sessions_.erase(it);
    } else {
      const int64_t mapped = MappedBytesLocked();
      absl::StatusOr<std::shared_ptr<SharedRegion>> region =
          hello.size > max_mapped_bytes_ - mapped
              ? absl::ResourceExhaustedError(absl::StrCat(
                    "its sessions map ", mapped, " bytes, and ", hello.size, " more would pass its limit of ",
                    max_mapped_bytes_, " (a quarter of max_memory_bytes)"))
              : SharedRegion::MapSealed(memfd.get(), hello.size);
      if (region.ok()) {
        it->second.region = *std::move(region);
        verdict = SendVerdict(connection.get(), absl::OkStatus());
        if (verdict.ok()) {
          it->second.socket = std::move(connection);
          spdlog::info("shared memory session {:016x} opened: reader pid {}, {} bytes", hello.session,
                       peer.pid, hello.size);
          return;
        }
      } else {
        verdict = region.status();
      }
      sessions_.erase(it);
    }
  }
  Warn(absl::StrCat("refused a reader (pid ", peer.pid, "): ", verdict.message()));
  (void)SendVerdict(connection.get(), verdict);
}

void SharedMemoryServer::Warn(const std::string& message) {
  const absl::Time now = absl::Now();
  if (now - last_warning_ < kWarningInterval) {
    ++suppressed_warnings_;
    return;
  }
  if (suppressed_warnings_ > 0) {
    spdlog::warn("shared memory: {} ({} more refusals since the last message)", message,
                 suppressed_warnings_);
  } else {
    spdlog::warn("shared memory: {}", message);
  }
  suppressed_warnings_ = 0;
  last_warning_ = now;
}

absl::StatusOr<std::shared_ptr<SharedRegion>> RequestRegion(SharedMemoryServer* server,
                                                            const proto::GetElementsRequest& request) {
  if (request.shm_session() == 0) return nullptr;
  std::shared_ptr<SharedRegion> region =
      server == nullptr ? nullptr : server->Region(request.shm_session(), request.shm_secret());
  if (region == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("GetElements: shared-memory session %016x is not open on this worker (it ended, the "
                        "worker restarted, or the secret is wrong): read over TCP",
                        request.shm_session()));
  }
  if (request.shm_offset() < 0 || request.shm_capacity() <= 0 ||
      request.shm_capacity() > region->size() - request.shm_offset()) {
    return absl::InvalidArgumentError(absl::StrCat("GetElements: shm_offset ", request.shm_offset(),
                                                   " and shm_capacity ", request.shm_capacity(),
                                                   " are outside the session's ", region->size(), " bytes"));
  }
  return region;
}

absl::StatusOr<std::optional<grpc::ByteBuffer>> PlaceInSharedMemory(
    const std::shared_ptr<SharedRegion>& region, const proto::GetElementsRequest& request,
    grpc::ByteBuffer& bytes, const std::vector<proto::LentTensor>& lent) {
  if (region == nullptr || bytes.Length() > static_cast<size_t>(request.shm_capacity())) return std::nullopt;
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return absl::InternalError("cannot read an encoded response's slices");
  char* out = region->data() + request.shm_offset();
  for (const grpc::Slice& slice : slices) {
    std::memcpy(out, slice.begin(), slice.size());
    out += slice.size();
  }
  proto::GetElementsResponse marker;
  marker.set_shared_memory_bytes(static_cast<int64_t>(bytes.Length()));
  for (const proto::LentTensor& t : lent) *marker.add_lent_tensors() = t;
  return SerializeToByteBuffer(marker);
}

}  // namespace sluice::worker
