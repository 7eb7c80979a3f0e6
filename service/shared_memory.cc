#include "service/shared_memory.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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

std::string HostId() {
  const std::string machine = FirstLine("/etc/machine-id");
  const std::string boot = FirstLine("/proc/sys/kernel/random/boot_id");
  if (machine.empty() && boot.empty()) return "";
  return absl::StrCat(machine, "/", boot);
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

absl::StatusOr<std::shared_ptr<SharedRegion>> SharedRegion::MapSealed(int fd, int64_t size) {
  if (size <= 0 || size > kMaxSharedMemoryBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory of ", size, " bytes: must be 1 to ", kMaxSharedMemoryBytes));
  }
  struct stat info {};
  if (fstat(fd, &info) != 0) return Errno("fstat of the reader's memfd");
  if (info.st_size != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the reader's memfd has ", info.st_size, " bytes, not the ", size, " it announced"));
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return absl::InvalidArgumentError(
        "the reader's memfd is not sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW)");
  }
  void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return Errno("mmap of the reader's memfd");
  return std::shared_ptr<SharedRegion>(new SharedRegion(static_cast<char*>(data), size));
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

absl::Status SendHello(int socket, const SharedMemoryHello& hello, int memfd) {
  if (hello.secret.size() != kSharedMemorySecretBytes) return absl::InvalidArgumentError("bad secret size");
  char bytes[kHelloBytes];
  std::memcpy(bytes, kHelloMagic, sizeof(kHelloMagic));
  PutU64(hello.session, bytes + 8);
  PutU64(static_cast<uint64_t>(hello.size), bytes + 16);
  std::memcpy(bytes + 24, hello.secret.data(), kSharedMemorySecretBytes);
  iovec data{.iov_base = bytes, .iov_len = sizeof(bytes)};
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
  std::memcpy(CMSG_DATA(header), &memfd, sizeof(int));
  if (sendmsg(socket, &message, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(bytes))) {
    return Errno("sending the shared-memory hello");
  }
  return absl::OkStatus();
}

absl::Status ReceiveHello(int socket, int timeout_ms, SharedMemoryHello* hello, UniqueFd* memfd) {
  if (absl::Status s = AwaitReadable(socket, timeout_ms, "hello"); !s.ok()) return s;
  char bytes[kHelloBytes + 1];
  iovec data{.iov_base = bytes, .iov_len = sizeof(bytes)};
  // Room for a few descriptors, so that extra ones are received (and
  // closed) rather than truncated.
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t got = recvmsg(socket, &message, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (got < 0) return Errno("receiving the shared-memory hello");
  int fds = 0;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if (fds++ == 0) {
        *memfd = UniqueFd(fd);
      } else {
        close(fd);
      }
    }
  }
  if (got != static_cast<ssize_t>(kHelloBytes) || std::memcmp(bytes, kHelloMagic, sizeof(kHelloMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a shared-memory hello of ", got, " bytes, not a ",
                                                   kHelloBytes, "-byte one starting SLUICESM"));
  }
  if (fds != 1 || (message.msg_flags & MSG_CTRUNC) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a shared-memory hello carries one memfd, this one ", fds, " descriptors"));
  }
  hello->session = GetU64(bytes + 8);
  hello->size = static_cast<int64_t>(GetU64(bytes + 16));
  hello->secret.assign(bytes + 24, kSharedMemorySecretBytes);
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
