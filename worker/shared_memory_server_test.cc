#include "worker/shared_memory_server.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "service/element_wire.h"

namespace sluice::worker {
namespace {

using Catch::Matchers::Contains;

std::unique_ptr<SharedMemoryServer> StartServer() {
  absl::StatusOr<std::unique_ptr<SharedMemoryServer>> server = SharedMemoryServer::Start(int64_t{1} << 30);
  REQUIRE(server.ok());
  return *std::move(server);
}

// A reader's side of a handshake: the worker's verdict, and (when OK) the
// socket that keeps the session open.
struct Connected {
  absl::Status verdict;
  UniqueFd socket;
};

Connected Connect(const proto::OpenSharedMemoryResponse& offer, int memfd, int64_t size,
                  const std::string& secret, int verdict_timeout_ms = 5000) {
  Connected result;
  absl::StatusOr<UniqueFd> socket = ConnectAbstract(offer.socket_name());
  REQUIRE(socket.ok());
  REQUIRE(SendHello(socket->get(), {.session = offer.session(), .secret = secret, .size = size}, memfd).ok());
  result.verdict = ReceiveVerdict(socket->get(), verdict_timeout_ms);
  result.socket = *std::move(socket);
  return result;
}

// Waits (up to 5 s) until `session` is gone from `server`.
bool SessionEnds(SharedMemoryServer& server, uint64_t session, const std::string& secret) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (server.Region(session, secret) != nullptr) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST_CASE("shared memory: a reader on this host opens a session, and hanging up ends it",
          "[worker][shared_memory]") {
  REQUIRE(!HostId().empty());
  std::unique_ptr<SharedMemoryServer> server = StartServer();
  absl::StatusOr<proto::OpenSharedMemoryResponse> offer = server->Offer(HostId());
  REQUIRE(offer.ok());
  CHECK(offer->secret().size() == kSharedMemorySecretBytes);
  CHECK(server->Region(offer->session(), offer->secret()) == nullptr);  // offered, not connected
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(1 << 20);
  REQUIRE(memfd.ok());
  Connected reader = Connect(*offer, memfd->get(), 1 << 20, offer->secret());
  REQUIRE(reader.verdict.ok());
  std::shared_ptr<SharedRegion> region = server->Region(offer->session(), offer->secret());
  REQUIRE(region != nullptr);
  CHECK(region->size() == (1 << 20));
  CHECK(server->connected_sessions() == 1);
  CHECK(server->Region(offer->session(), std::string(kSharedMemorySecretBytes, 0)) == nullptr);
  // The worker's writes are the reader's memory.
  std::memcpy(region->data() + 100, "hello", 5);
  char* mine = static_cast<char*>(mmap(nullptr, 1 << 20, PROT_READ, MAP_SHARED, memfd->get(), 0));
  REQUIRE(mine != MAP_FAILED);
  CHECK(std::string(mine + 100, 5) == "hello");
  munmap(mine, 1 << 20);
  // The same session cannot be connected twice.
  absl::StatusOr<UniqueFd> again = CreateSealedMemfd(4096);
  REQUIRE(again.ok());
  CHECK(Connect(*offer, again->get(), 4096, offer->secret()).verdict.code() ==
        absl::StatusCode::kPermissionDenied);
  reader.socket = UniqueFd();  // hang up
  CHECK(SessionEnds(*server, offer->session(), offer->secret()));
  CHECK(server->connected_sessions() == 0);
  // A region held by a response being written stays mapped.
  CHECK(region->size() == (1 << 20));
}

TEST_CASE("shared memory: the worker refuses another host, a wrong secret and an unsealed memfd",
          "[worker][shared_memory]") {
  std::unique_ptr<SharedMemoryServer> server = StartServer();
  absl::StatusOr<proto::OpenSharedMemoryResponse> other = server->Offer("another-machine/another-boot");
  CHECK(other.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(other.status().message() ==
        "the reader is on another host than this worker, or in another network namespace");
  // The same boot of the same machine in another network namespace: the
  // worker's abstract socket is out of its reach (issue 36).
  const std::string here = HostId();
  REQUIRE(!NetworkNamespace().empty());
  REQUIRE(here.ends_with("/" + NetworkNamespace()));
  const std::string elsewhere = here.substr(0, here.size() - NetworkNamespace().size()) + "net:[1]";
  absl::StatusOr<proto::OpenSharedMemoryResponse> other_namespace = server->Offer(elsewhere);
  CHECK(other_namespace.status().code() == absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<proto::OpenSharedMemoryResponse> offer = server->Offer(HostId());
  REQUIRE(offer.ok());
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(4096);
  REQUIRE(memfd.ok());
  std::string wrong = offer->secret();
  wrong[0] = static_cast<char>(wrong[0] ^ 1);
  Connected forger = Connect(*offer, memfd->get(), 4096, wrong);
  CHECK(forger.verdict.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(forger.verdict.message()), Contains("a wrong secret"));
  // A failed hello ends the offer: the right secret is no use after it.
  CHECK(Connect(*offer, memfd->get(), 4096, offer->secret()).verdict.code() ==
        absl::StatusCode::kPermissionDenied);

  // A memfd that could shrink would fault the worker's writes.
  offer = server->Offer(HostId());
  REQUIRE(offer.ok());
  UniqueFd unsealed(memfd_create("unsealed", MFD_CLOEXEC));
  REQUIRE(ftruncate(unsealed.get(), 4096) == 0);
  Connected loose = Connect(*offer, unsealed.get(), 4096, offer->secret());
  CHECK(loose.verdict.code() == absl::StatusCode::kInvalidArgument);
  CHECK(loose.verdict.message() ==
        "the reader's memfd is not sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW)");

  // Nor may a reader announce more than its memfd holds.
  offer = server->Offer(HostId());
  REQUIRE(offer.ok());
  Connected liar = Connect(*offer, memfd->get(), 8192, offer->secret());
  CHECK(liar.verdict.code() == absl::StatusCode::kInvalidArgument);
  CHECK(liar.verdict.message() == "the reader's memfd has 4096 bytes, not the 8192 it announced");
  CHECK(server->connected_sessions() == 0);
}

TEST_CASE("shared memory: a connection that never says hello holds up no other reader, and is closed",
          "[worker][shared_memory]") {
  std::unique_ptr<SharedMemoryServer> server = StartServer();
  absl::StatusOr<proto::OpenSharedMemoryResponse> offer = server->Offer(HostId());
  REQUIRE(offer.ok());
  absl::StatusOr<UniqueFd> silent = ConnectAbstract(offer->socket_name());
  REQUIRE(silent.ok());
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(4096);
  REQUIRE(memfd.ok());
  // Answered while the silent one still has its 2 s to speak.
  Connected reader = Connect(*offer, memfd->get(), 4096, offer->secret(), /*verdict_timeout_ms=*/1000);
  CHECK(reader.verdict.ok());
  // The silent one is closed without an answer once its time is up.
  const absl::Status closed = ReceiveVerdict(silent->get(), 5000);
  CHECK(closed.code() == absl::StatusCode::kUnavailable);
  CHECK(closed.message() == "the worker closed the shared-memory socket without an answer");
  CHECK(server->connected_sessions() == 1);
}

TEST_CASE("shared memory: one client's offers that nobody takes up cannot crowd out another's",
          "[worker][shared_memory]") {
  // Issue 50, finding 8: 256 OpenSharedMemory calls pushed other readers to TCP.
  std::unique_ptr<SharedMemoryServer> server = StartServer();
  for (int i = 0; i < kMaxPendingSharedMemoryOffersPerClient; ++i) {
    REQUIRE(server->Offer(HostId(), "mallory").ok());
  }
  const absl::StatusOr<proto::OpenSharedMemoryResponse> refused = server->Offer(HostId(), "mallory");
  CHECK(refused.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(refused.status().message() ==
        "this worker holds 16 shared-memory offers of this client that no reader has taken up, its most per "
        "client (each lapses 30s after it was made): this reader reads over TCP");
  // Another tenant's reader still opens a session, and it works.
  absl::StatusOr<proto::OpenSharedMemoryResponse> offer = server->Offer(HostId(), "alice");
  REQUIRE(offer.ok());
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(4096);
  REQUIRE(memfd.ok());
  Connected reader = Connect(*offer, memfd->get(), 4096, offer->secret());
  CHECK(reader.verdict.ok());
  CHECK(server->connected_sessions() == 1);
}

TEST_CASE("shared memory: sessions together map no more than the worker's budget",
          "[worker][shared_memory]") {
  absl::StatusOr<std::unique_ptr<SharedMemoryServer>> server = SharedMemoryServer::Start(1 << 20);
  REQUIRE(server.ok());
  std::vector<Connected> readers;
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(512 << 10);
  REQUIRE(memfd.ok());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<proto::OpenSharedMemoryResponse> offer = (*server)->Offer(HostId());
    REQUIRE(offer.ok());
    readers.push_back(Connect(*offer, memfd->get(), 512 << 10, offer->secret()));
  }
  CHECK(readers[0].verdict.ok());
  CHECK(readers[1].verdict.ok());
  CHECK(readers[2].verdict.code() == absl::StatusCode::kResourceExhausted);
  CHECK(readers[2].verdict.message() ==
        "its sessions map 1048576 bytes, and 524288 more would pass its limit of 1048576 (a quarter of "
        "max_memory_bytes)");
  CHECK((*server)->connected_sessions() == 2);
}

TEST_CASE("shared memory: a request's region is checked, and a response that fits goes into it",
          "[worker][shared_memory]") {
  std::unique_ptr<SharedMemoryServer> server = StartServer();
  absl::StatusOr<proto::OpenSharedMemoryResponse> offer = server->Offer(HostId());
  REQUIRE(offer.ok());
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(8192);
  REQUIRE(memfd.ok());
  Connected reader = Connect(*offer, memfd->get(), 8192, offer->secret());
  REQUIRE(reader.verdict.ok());

  proto::GetElementsRequest request;
  absl::StatusOr<std::shared_ptr<SharedRegion>> none = RequestRegion(server.get(), request);
  REQUIRE(none.ok());
  CHECK(*none == nullptr);  // no shared memory asked

  request.set_shm_session(offer->session() + 1);
  request.set_shm_secret(offer->secret());
  request.set_shm_offset(4096);
  request.set_shm_capacity(4096);
  CHECK(RequestRegion(server.get(), request).status().code() == absl::StatusCode::kFailedPrecondition);
  // The id alone does not open another reader's memory.
  request.set_shm_session(offer->session());
  request.set_shm_secret(std::string(kSharedMemorySecretBytes, 'x'));
  CHECK(RequestRegion(server.get(), request).status().code() == absl::StatusCode::kFailedPrecondition);
  request.set_shm_secret(offer->secret());
  request.set_shm_session(offer->session() + 1);
  CHECK(RequestRegion(nullptr, request).status().message() ==
        absl::StrFormat("GetElements: shared-memory session %016x is not open on this worker (it ended, the "
                        "worker restarted, or the secret is wrong): read over TCP",
                        offer->session() + 1));
  request.set_shm_session(offer->session());
  request.set_shm_capacity(4097);
  CHECK(RequestRegion(server.get(), request).status().message() ==
        "GetElements: shm_offset 4096 and shm_capacity 4097 are outside the session's 8192 bytes");
  request.set_shm_offset(-1);
  request.set_shm_capacity(1);
  CHECK(RequestRegion(server.get(), request).status().code() == absl::StatusCode::kInvalidArgument);
  request.set_shm_offset(4096);
  request.set_shm_capacity(4096);
  absl::StatusOr<std::shared_ptr<SharedRegion>> region = RequestRegion(server.get(), request);
  REQUIRE(region.ok());
  REQUIRE(*region != nullptr);

  std::vector<Element> elements;
  for (int64_t i = 0; i < 3; ++i) elements.push_back(Element::Of(Tensor::FromVector<int64_t>({i, i + 1})));
  absl::StatusOr<grpc::ByteBuffer> bytes =
      EncodeElementsResponse(elements, false, 7, proto::COMPRESSION_NONE);
  REQUIRE(bytes.ok());
  const size_t length = bytes->Length();
  absl::StatusOr<std::optional<grpc::ByteBuffer>> placed = PlaceInSharedMemory(*region, request, *bytes);
  REQUIRE(placed.ok());
  REQUIRE(placed->has_value());
  ElementsResponse marker;
  REQUIRE(DecodeElementsResponse(&**placed, &marker).ok());
  CHECK(marker.elements.empty());
  CHECK(marker.shared_memory_bytes == static_cast<int64_t>(length));
  // What the reader decodes from its region is the response.
  grpc::Slice slice((*region)->data() + 4096, length, grpc::Slice::STATIC_SLICE);
  grpc::ByteBuffer in_memory(&slice, 1);
  ElementsResponse decoded;
  REQUIRE(DecodeElementsResponse(&in_memory, &decoded).ok());
  CHECK(decoded.first_index == 7);
  REQUIRE(decoded.elements.size() == 3);
  CHECK(decoded.elements[2].components[0].data<int64_t>()[1] == 3);

  // Past the region's capacity it goes inline.
  request.set_shm_capacity(static_cast<int64_t>(length) - 1);
  placed = PlaceInSharedMemory(*region, request, *bytes);
  REQUIRE(placed.ok());
  CHECK(!placed->has_value());
}

}  // namespace
}  // namespace sluice::worker

namespace sluice::worker {
namespace {

TEST_CASE("shared memory: another local user can neither hold the worker's connections nor flood its log",
          "[worker][shared_memory]") {
  if (getuid() != 0) {
    WARN("skipped: connecting as another uid needs root");
    return;
  }
  std::unique_ptr<SharedMemoryServer> server = StartServer();
  absl::StatusOr<proto::OpenSharedMemoryResponse> offer = server->Offer(HostId());
  REQUIRE(offer.ok());
  auto log = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*log);
  spdlog::default_logger()->sinks().push_back(sink);
  // Made before the fork: the child only makes system calls.
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, offer->socket_name().data(), offer->socket_name().size());
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + offer->socket_name().size());
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (setuid(65534) != 0) _exit(2);
    // 64 silent connections held, then a connect-and-close loop.
    for (int i = 0; i < 64; ++i) {
      const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
      (void)connect(fd, reinterpret_cast<const sockaddr*>(&address), length);
    }
    for (int i = 0; i < 3000; ++i) {
      const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
      (void)connect(fd, reinterpret_cast<const sockaddr*>(&address), length);
      close(fd);
    }
    // A refusal a second later reports how many were suppressed.
    usleep(1200 * 1000);
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    (void)connect(fd, reinterpret_cast<const sockaddr*>(&address), length);
    usleep(300 * 1000);
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // The worker's own user still gets a session at once.
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(4096);
  REQUIRE(memfd.ok());
  Connected reader = Connect(*offer, memfd->get(), 4096, offer->secret(), /*verdict_timeout_ms=*/1000);
  CHECK(reader.verdict.ok());
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::find(sinks.begin(), sinks.end(), sink));
  const std::string text = log->str();
  INFO(text);
  // Every connection was refused at once, in a handful of lines.
  CHECK_THAT(text,
             Contains("refused a connection from uid 65534: shared memory is for readers running as uid 0"));
  CHECK(std::count(text.begin(), text.end(), '\n') <= 10);
  CHECK_THAT(text, Contains("more refusals since the last message"));
}

}  // namespace
}  // namespace sluice::worker
