#include "service/shared_memory.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

constexpr char kHelloMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'S', 'M'};
constexpr size_t kHelloBytes = sizeof(kHelloMagic) + 8 + 8 + kSharedMemorySecretBytes;
constexpr size_t kMaxVerdictMessage = 900;
constexpr char kBufferMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'B', 'F'};
constexpr size_t kBufferMessageBytes = sizeof(kBufferMagic) + 8 + 8;

std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

sockaddr_un AbstractAddress(const std::string& name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const size_t bytes = std::min(name.size(), sizeof(address.sun_path) - 1);
  std::memcpy(address.sun_path + 1, name.data(), bytes);  // sun_path[0] == 0: abstract
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + bytes);
  return address;
}

// Waits up to `timeout_ms` for `socket` to have something to read.
absl::Status AwaitReadable(int socket, int timeout_ms, const char* what) {
  pollfd p{.fd = socket, .events = POLLIN, .revents = 0};
  int ready = 0;
  do {
    ready = poll(&p, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return Errno(absl::StrCat("waiting for ", what));
  if (ready == 0)
    return absl::DeadlineExceededError(absl::StrCat("no ", what, " within ", timeout_ms, " ms"));
  return absl::OkStatus();
}

void PutU64(uint64_t value, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetU64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}

}  // namespace

std::string NetworkNamespace() {
  char link[64];
  const ssize_t length = readlink("/proc/self/ns/net", link, sizeof(link));
  if (length <= 0 || length >= static_cast<ssize_t>(sizeof(link))) return "";
  return std::string(link, static_cast<size_t>(length));
}

std::string HostId() {
  const std::string machine = FirstLine("/etc/machine-id");
  const std::string boot = FirstLine("/proc/sys/kernel/random/boot_id");
  if (machine.empty() && boot.empty()) return "";
  return absl::StrCat(machine, "/", boot, "/", NetworkNamespace());
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

namespace {

// The size and seals every mapping of another process's memfd checks first:
// sealed against shrinking, so that reading it never faults.
absl::Status CheckSealed(int fd, int64_t size, const char* what) {
  if (size <= 0 || size > kMaxSharedMemoryBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory of ", size, " bytes: must be 1 to ", kMaxSharedMemoryBytes));
  }
  struct stat info {};
  if (fstat(fd, &info) != 0) return Errno(absl::StrCat("fstat of ", what));
  if (info.st_size != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", info.st_size, " bytes, not the ", size, " it announced"));
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<SharedRegion>> SharedRegion::MapSealed(int fd, int64_t size) {
  if (absl::Status s = CheckSealed(fd, size, "the reader's memfd"); !s.ok()) return s;
  void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return Errno("mmap of the reader's memfd");
  return std::shared_ptr<SharedRegion>(new SharedRegion(static_cast<char*>(data), size));
}

absl::StatusOr<std::shared_ptr<SharedRegion>> SharedRegion::MapSealedPrivate(int fd, int64_t size,
                                                                             int64_t offset, int64_t length) {
  if (absl::Status s = CheckSealed(fd, size, "the worker's lent memfd"); !s.ok()) return s;
  if (offset < 0 || length <= 0 || offset > size || length > size - offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("bytes [", offset, ", +", length, ") are outside a lent memfd of ", size));
  }
  const auto page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  const int64_t first = offset - offset % page;
  const int64_t bytes = std::min(size, (offset + length + page - 1) / page * page) - first;
  void* data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, first);
  if (data == MAP_FAILED) return Errno("mmap of the worker's lent memfd");
  // Populated for reading (MAP_POPULATE would copy every page of a writable
  // private mapping): a page is copied only if written. A kernel before
  // 5.14 lacks it, and the pages are faulted in as they are read.
  (void)madvise(data, static_cast<size_t>(bytes), MADV_POPULATE_READ);
  return std::shared_ptr<SharedRegion>(new SharedRegion(static_cast<char*>(data), bytes));
}

SharedRegion::~SharedRegion() { munmap(data_, static_cast<size_t>(size_)); }

absl::StatusOr<UniqueFd> CreateSealedMemfd(int64_t size) {
  UniqueFd fd(memfd_create("sluice-reader", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Errno("memfd_create");
  if (ftruncate(fd.get(), size) != 0) return Errno(absl::StrCat("ftruncate of a memfd to ", size, " bytes"));
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Errno("sealing a memfd");
  }
  return fd;
}

absl::StatusOr<UniqueFd> ConnectAbstract(const std::string& name) {
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket(AF_UNIX)");
  socklen_t length = 0;
  const sockaddr_un address = AbstractAddress(name, &length);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    return Errno(absl::StrCat("connecting to the worker's socket @", name));
  }
  return fd;
}

absl::StatusOr<UniqueFd> ListenAbstract(std::string* name) {
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Errno("socket(AF_UNIX)");
  *name = absl::StrCat("sluice-worker-", getpid(), "-", absl::BytesToHexString(RandomBytes(8)));
  socklen_t length = 0;
  const sockaddr_un address = AbstractAddress(*name, &length);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    return Errno(absl::StrCat("binding the abstract socket @", *name));
  }
  if (listen(fd.get(), 64) != 0) return Errno("listen on the shared-memory socket");
  return fd;
}

namespace {

// One message of `size` bytes with `fd` attached (SCM_RIGHTS).
absl::Status SendWithFd(int socket, const char* bytes, size_t size, int fd, int flags, const char* what) {
  iovec data{.iov_base = const_cast<char*>(bytes), .iov_len = size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  if (sendmsg(socket, &message, MSG_NOSIGNAL | flags) != static_cast<ssize_t>(size)) return Errno(what);
  return absl::OkStatus();
}

// One message into `bytes` (at most `capacity`), waiting for it at most
// `timeout_ms`: its length in `got`, and the one descriptor it carries in
// `fd` (any more are closed); `fds` counts them.
absl::Status ReceiveWithFd(int socket, int timeout_ms, char* bytes, size_t capacity, ssize_t* got,
                           UniqueFd* fd, int* fds, bool* truncated, const char* what) {
  if (absl::Status s = AwaitReadable(socket, timeout_ms, what); !s.ok()) return s;
  iovec data{.iov_base = bytes, .iov_len = capacity};
  // Room for a few descriptors, so that extra ones are received (and
  // closed) rather than truncated.
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  *got = recvmsg(socket, &message, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (*got < 0) return Errno(absl::StrCat("receiving a ", what));
  *fds = 0;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received = -1;
      std::memcpy(&received, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if ((*fds)++ == 0) {
        *fd = UniqueFd(received);
      } else {
        close(received);
      }
    }
  }
  *truncated = (message.msg_flags & MSG_CTRUNC) != 0;
  return absl::OkStatus();
}

}  // namespace

absl::Status SendHello(int socket, const SharedMemoryHello& hello, int memfd) {
  if (hello.secret.size() != kSharedMemorySecretBytes) return absl::InvalidArgumentError("bad secret size");
  char bytes[kHelloBytes];
  std::memcpy(bytes, kHelloMagic, sizeof(kHelloMagic));
  PutU64(hello.session, bytes + 8);
  PutU64(static_cast<uint64_t>(hello.size), bytes + 16);
  std::memcpy(bytes + 24, hello.secret.data(), kSharedMemorySecretBytes);
  return SendWithFd(socket, bytes, sizeof(bytes), memfd, 0, "sending the shared-memory hello");
}

absl::Status ReceiveHello(int socket, int timeout_ms, SharedMemoryHello* hello, UniqueFd* memfd) {
  char bytes[kHelloBytes + 1];
  ssize_t got = 0;
  int fds = 0;
  bool truncated = false;
  if (absl::Status s =
          ReceiveWithFd(socket, timeout_ms, bytes, sizeof(bytes), &got, memfd, &fds, &truncated, "hello");
      !s.ok()) {
    return s;
  }
  if (got != static_cast<ssize_t>(kHelloBytes) || std::memcmp(bytes, kHelloMagic, sizeof(kHelloMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a shared-memory hello of ", got, " bytes, not a ",
                                                   kHelloBytes, "-byte one starting SLUICESM"));
  }
  if (fds != 1 || truncated) {
    return absl::InvalidArgumentError(
        absl::StrCat("a shared-memory hello carries one memfd, this one ", fds, " descriptors"));
  }
  hello->session = GetU64(bytes + 8);
  hello->size = static_cast<int64_t>(GetU64(bytes + 16));
  hello->secret.assign(bytes + 24, kSharedMemorySecretBytes);
  return absl::OkStatus();
}

absl::Status SendLentBuffer(int socket, uint64_t lease, int64_t size, int memfd) {
  char bytes[kBufferMessageBytes];
  std::memcpy(bytes, kBufferMagic, sizeof(kBufferMagic));
  PutU64(lease, bytes + 8);
  PutU64(static_cast<uint64_t>(size), bytes + 16);
  // Never waits: a reader that reads nothing is lent nothing more.
  return SendWithFd(socket, bytes, sizeof(bytes), memfd, MSG_DONTWAIT, "sending a lent buffer's memfd");
}

absl::Status ReceiveLentBuffer(int socket, int timeout_ms, uint64_t* lease, int64_t* size, UniqueFd* memfd) {
  char bytes[kBufferMessageBytes + 1];
  ssize_t got = 0;
  int fds = 0;
  bool truncated = false;
  if (absl::Status s = ReceiveWithFd(socket, timeout_ms, bytes, sizeof(bytes), &got, memfd, &fds, &truncated,
                                     "lent buffer from the worker");
      !s.ok()) {
    return s;
  }
  if (got == 0) return absl::UnavailableError("the worker closed the shared-memory socket");
  if (got != static_cast<ssize_t>(kBufferMessageBytes) ||
      std::memcmp(bytes, kBufferMagic, sizeof(kBufferMagic)) != 0 || fds != 1 || truncated) {
    return absl::DataLossError(absl::StrCat("a lent-buffer message of ", got, " bytes and ", fds,
                                            " descriptors, not a ", kBufferMessageBytes,
                                            "-byte one starting SLUICEBF with one memfd"));
  }
  *lease = GetU64(bytes + 8);
  *size = static_cast<int64_t>(GetU64(bytes + 16));
  return absl::OkStatus();
}

absl::Status SendVerdict(int socket, const absl::Status& verdict) {
  std::string bytes(1, static_cast<char>(verdict.code()));
  const absl::string_view message = verdict.message().substr(0, kMaxVerdictMessage);
  bytes.append(message.data(), message.size());
  if (send(socket, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    return Errno("sending the shared-memory verdict");
  }
  return absl::OkStatus();
}

absl::Status ReceiveVerdict(int socket, int timeout_ms) {
  if (absl::Status s = AwaitReadable(socket, timeout_ms, "answer from the worker"); !s.ok()) return s;
  char bytes[kMaxVerdictMessage + 1];
  const ssize_t got = recv(socket, bytes, sizeof(bytes), MSG_DONTWAIT);
  if (got < 0) return Errno("receiving the worker's answer");
  if (got == 0) return absl::UnavailableError("the worker closed the shared-memory socket without an answer");
  const auto code = static_cast<absl::StatusCode>(static_cast<unsigned char>(bytes[0]));
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  return absl::Status(code, std::string(bytes + 1, static_cast<size_t>(got - 1)));
}

std::string RandomBytes(size_t n) {
  std::string bytes(n, '\0');
  size_t filled = 0;
  while (filled < n) {
    const ssize_t got = getrandom(bytes.data() + filled, n - filled, 0);
    if (got > 0) filled += static_cast<size_t>(got);
  }
  return bytes;
}

}  // namespace sluice
