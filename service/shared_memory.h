// Shared memory between a reader and a worker on one host: the pieces both
// sides use (docs/design.md, "Shared memory" and "Lent tensors"). The reader
// makes a memfd, seals its size, and passes it over the worker's abstract
// Unix socket with a hello that names the session and proves, by its
// secret, that the sender is the reader the worker offered the session to
// over gRPC. The worker then writes GetElements responses into the regions
// the reader's requests name. A memfd has no name in /dev/shm, so a reader
// that dies leaves nothing behind: the memory goes when both ends have
// closed it.
//
// The family, and who owns which side:
//
//   service/shared_memory.{h,cc}        both: host id, sealed memfds, the
//                                       socket and its hello (this file)
//   worker/ (the worker owns sessions, its regions' writes and its heaps)
//     shared_memory_server.{h,cc}       offers sessions, checks hellos, maps
//                                       each reader's memfd; PlaceInSharedMemory
//     shared_memory_heap.{h,cc}         a task's heap of sealed memfds, whose
//                                       large tensors can be lent
//     shared_memory_lending.cc          Lend and Release: a session's leases
//     element_responses.{h,cc}          the policy: lend, place in the region,
//                                       or fall back to sending inline
//   client/read/ (the reader owns its memfd and what it maps)
//     shared_memory_transport.{h,cc}    opens a session, names a region per
//                                       request, reads responses from it; TCP
//                                       when the worker is on another host
//     shared_memory_lent_tensors.{h,cc} maps lent memfds privately, gives each
//                                       lease back when its last view goes
#ifndef SLUICE_SERVICE_SHARED_MEMORY_H_
#define SLUICE_SERVICE_SHARED_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice {

// Where a worker's abstract socket can be reached from: this boot of this
// host (/etc/machine-id and the kernel's boot_id) and this network
// namespace (NetworkNamespace()). Abstract Unix sockets are per network
// namespace, so a reader in another one (a container, or a host simulated
// by a namespace, as tests/multihost does) cannot connect to the worker's
// and could not be handed its memfd: it is "another host" for shared
// memory, and reads over TCP without a warning. Empty when neither the
// machine id nor the boot id can be read.
std::string HostId();
// This process's network namespace as /proc/self/ns/net names it
// ("net:[4026531840]": unique among the namespaces of one boot), or empty
// when it cannot be read.
std::string NetworkNamespace();

// The most memory one session may map.
inline constexpr int64_t kMaxSharedMemoryBytes = int64_t{1} << 30;
// The most tensors a worker lends one session at once (past it, it copies
// them into the session's region): so the most lent buffers a reader may
// have received and not yet placed.
inline constexpr size_t kMaxLeases = 64;
// The bytes of the buffers a worker lends one session at once.
inline constexpr int64_t kMaxLentBytes = kMaxSharedMemoryBytes;

// The element bytes (ElementWireBound, summed) that a worker puts in a
// shared-memory region of `capacity` bytes: the rest is left for the
// response's own framing (a frame's header, spec, shapes and tags).
inline int64_t SharedMemoryFitBytes(int64_t capacity) {
  return capacity > 2 * 65536 ? capacity - capacity / 64 - 65536 : 0;
}
inline constexpr size_t kSharedMemorySecretBytes = 16;

// A file descriptor, closed when destroyed.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

// A shared mapping of a whole memfd, unmapped when destroyed.
class SharedRegion {
 public:
  // Maps `fd` (read and write) after checking that its size is `size` and
  // cannot change: sealed against shrinking and growing, so that a write
  // into it never faults.
  static absl::StatusOr<std::shared_ptr<SharedRegion>> MapSealed(int fd, int64_t size);
  // The same checks on a lent buffer of `size` bytes, then a private
  // mapping of the whole pages that hold [offset, offset + length): every
  // page mapped at once for reading, and a write into one makes a page of
  // this process's own, never reaching the lender's memory. data() is the
  // first of those pages, offset rounded down to a page.
  static absl::StatusOr<std::shared_ptr<SharedRegion>> MapSealedPrivate(int fd, int64_t size, int64_t offset,
                                                                        int64_t length);
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  char* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  SharedRegion(char* data, int64_t size) : data_(data), size_(size) {}
  char* const data_;
  const int64_t size_;
};

// A memfd of `size` bytes, sealed against shrinking, growing and further
// seals.
absl::StatusOr<UniqueFd> CreateSealedMemfd(int64_t size);

// A Unix socket connected to the abstract name `name` (no leading NUL).
absl::StatusOr<UniqueFd> ConnectAbstract(const std::string& name);
// A Unix socket listening on a fresh abstract name, written to `name`.
absl::StatusOr<UniqueFd> ListenAbstract(std::string* name);

// What the reader says first on the socket, with its memfd attached.
struct SharedMemoryHello {
  uint64_t session = 0;
  std::string secret;  // kSharedMemorySecretBytes
  int64_t size = 0;    // of the memfd
};
absl::Status SendHello(int socket, const SharedMemoryHello& hello, int memfd);
// Receives a hello and its memfd, waiting at most `timeout_ms`.
absl::Status ReceiveHello(int socket, int timeout_ms, SharedMemoryHello* hello, UniqueFd* memfd);

// The worker's answer to a hello: OK, or why not.
absl::Status SendVerdict(int socket, const absl::Status& verdict);
// The worker's verdict, or an error reading it (within `timeout_ms`).
absl::Status ReceiveVerdict(int socket, int timeout_ms);

// The worker lends a reader a tensor (GetElementsResponse.lent_tensors)
// by sending the memfd it lies in over the session's socket, under the
// lease's id, just before the response that names the lease. Sending never
// waits.
absl::Status SendLentBuffer(int socket, uint64_t lease, int64_t size, int memfd);
// The next lent buffer on the socket, waiting at most `timeout_ms`.
absl::Status ReceiveLentBuffer(int socket, int timeout_ms, uint64_t* lease, int64_t* size, UniqueFd* memfd);

// Random bytes for a secret or a session id.
std::string RandomBytes(size_t n);

}  // namespace sluice

#endif  // SLUICE_SERVICE_SHARED_MEMORY_H_
