#include "pipeline/python_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "python_host_script.h"  // kPythonHostScript, generated from python/sluice/_worker_host.py

namespace sluice {
namespace {

constexpr int64_t kStartTimeoutMs = 120000;  // importing torch can take a while
constexpr int64_t kMemoryCheckMs = 100;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The process's resident memory, from /proc; 0 when unknown.
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return 0;
}

absl::Status WriteAll(int fd, std::vector<iovec> pieces) {
  size_t index = 0;
  while (index < pieces.size()) {
    // sendmsg with MSG_NOSIGNAL: a process that died must fail the call,
    // not raise SIGPIPE in the worker.
    msghdr message{};
    message.msg_iov = pieces.data() + index;
    message.msg_iovlen = std::min<size_t>(pieces.size() - index, 512);
    const ssize_t n = sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(std::strerror(errno));
    }
    size_t left = static_cast<size_t>(n);
    while (index < pieces.size() && left >= pieces[index].iov_len) left -= pieces[index++].iov_len;
    if (index < pieces.size()) {
      pieces[index].iov_base = static_cast<char*>(pieces[index].iov_base) + left;
      pieces[index].iov_len -= left;
    }
  }
  return absl::OkStatus();
}

// The frame's tensor bytes go into `shared` (the request half) when they
// fit, and the header says so; else they follow it on the socket.
absl::Status SendFrame(int fd, char* shared, size_t shared_half, const PythonFrame& frame) {
  size_t total = 0;
  for (const auto& piece : frame.payload) total += piece.second;
  std::string header = frame.header;
  std::vector<iovec> pieces;
  if (total <= shared_half && !header.empty() && header.back() == '}') {
    size_t offset = 0;
    for (const auto& [data, size] : frame.payload) {
      if (size > 0) std::memcpy(shared + offset, data, size);
      offset += size;
    }
    header.insert(header.size() - 1, ",\"shm\":true");
  }
  const uint64_t length = header.size();  // little-endian on every host Sluice builds for
  pieces.push_back({const_cast<uint64_t*>(&length), sizeof(length)});
  pieces.push_back({header.data(), header.size()});
  if (total > shared_half) {
    for (const auto& [data, size] : frame.payload) {
      if (size > 0) pieces.push_back({const_cast<char*>(data), size});
    }
  }
  return WriteAll(fd, std::move(pieces));
}

}  // namespace

PythonPool::PythonPool(PythonSettings settings, std::string owner)
    : settings_(std::move(settings)), owner_(std::move(owner)) {}

PythonPool::~PythonPool() {
  absl::MutexLock lock(&mu_);
  for (auto& process : idle_) Discard(std::move(process), true);
  idle_.clear();
}

absl::StatusOr<std::unique_ptr<PythonPool::Process>> PythonPool::Spawn() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("python: socketpair: ", std::strerror(errno)));
  }
  const int memory = memfd_create("sluice-python", MFD_CLOEXEC);
  if (memory < 0 || ftruncate(memory, static_cast<off_t>(kSharedBytes)) != 0) {
    const int error = errno;
    if (memory >= 0) close(memory);
    close(fds[0]);
    close(fds[1]);
    return absl::ResourceExhaustedError(absl::StrCat("python: shared memory: ", std::strerror(error)));
  }
  void* shared = mmap(nullptr, kSharedBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memory, 0);
  if (shared == MAP_FAILED) {
    const int error = errno;
    close(memory);
    close(fds[0]);
    close(fds[1]);
    return absl::ResourceExhaustedError(absl::StrCat("python: shared memory: ", std::strerror(error)));
  }
  std::vector<std::string> args = {settings_.interpreter,     "-c", kPythonHostScript, "3", "--shared", "4",
                                   absl::StrCat(kSharedBytes)};
  for (const std::string& dir : settings_.path) args.insert(args.end(), {"--path", dir});
  for (const std::string& module : settings_.modules) args.insert(args.end(), {"--module", module});
  if (settings_.import_on_call) args.push_back("--import-on-call");
  if (settings_.allow_client_functions || settings_.import_on_call) args.push_back("--client-functions");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::ResourceExhaustedError(absl::StrCat("python: fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec: the parent has threads. No
    // PR_SET_PDEATHSIG: it fires when the forking *thread* ends (a task's),
    // not the worker. The host exits when the worker's end of the socket
    // closes, which the kernel does when the worker dies.
    // Out of the way first: either may itself be 3 or 4. The copies do
    // not close on exec.
    const int socket_copy = fcntl(fds[1], F_DUPFD, 10);
    const int memory_copy = fcntl(memory, F_DUPFD, 10);
    dup2(socket_copy, 3);
    dup2(memory_copy, 4);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    for (int fd = 5; fd < 1024; ++fd) close(fd);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  close(memory);  // the mapping stays
  auto process = std::make_unique<Process>();
  process->pid = pid;
  process->fd = fds[0];
  process->shared = static_cast<char*>(shared);
  std::string header, storage;
  std::string_view payload;
  const std::string what = absl::StrCat("python (", settings_.interpreter, ")");
  if (absl::Status s = ReadFrame(*process, kStartTimeoutMs, what, &header, &payload, &storage); !s.ok()) {
    const std::string ended = Discard(std::move(process), true);
    return absl::FailedPreconditionError(
        absl::StrCat(owner_, " cannot start its Python processes: ", s.message(), " (", ended, ")"));
  }
  if (std::string error = PythonErrorOf(header); !error.empty()) {
    Discard(std::move(process), true);
    return absl::FailedPreconditionError(absl::StrCat(owner_, " cannot import its Python modules [",
                                                      absl::StrJoin(settings_.modules, ", "), "]: ", error));
  }
  return process;
}

absl::Status PythonPool::ReadFrame(Process& process, int64_t deadline_ms, const std::string& what,
                                   std::string* header, std::string_view* payload, std::string* storage) {
  const int64_t deadline = NowMs() + deadline_ms;
  auto read_exact = [&](char* out, size_t n) -> absl::Status {
    size_t got = 0;
    while (got < n) {
      const int64_t left = deadline - NowMs();
      if (left <= 0) {
        return absl::DeadlineExceededError(
            absl::StrCat(what, ": no answer within ", deadline_ms, " ms (python.call_timeout_ms)"));
      }
      pollfd p{process.fd, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(std::min(left, kMemoryCheckMs)));
      if (ready < 0 && errno != EINTR) return absl::UnavailableError(std::strerror(errno));
      if (settings_.max_rss_bytes > 0 && ResidentBytes(process.pid) > settings_.max_rss_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(what,
                                                         ": its Python process passed python.max_rss_bytes (",
                                                         settings_.max_rss_bytes, " bytes resident)"));
      }
      if (ready <= 0) continue;
      const ssize_t k = read(process.fd, out + got, n - got);
      if (k == 0) return absl::UnavailableError(absl::StrCat(what, ": its Python process ended"));
      if (k < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
      }
      got += static_cast<size_t>(k);
    }
    return absl::OkStatus();
  };
  uint64_t length = 0;
  if (absl::Status s = read_exact(reinterpret_cast<char*>(&length), sizeof(length)); !s.ok()) return s;
  if (length > (uint64_t{1} << 30))
    return absl::InternalError(absl::StrCat(what, ": a reply header of ", length, " bytes"));
  header->resize(length);
  if (absl::Status s = read_exact(header->data(), length); !s.ok()) return s;
  absl::StatusOr<PayloadPlace> place = PayloadOf(*header);
  if (!place.ok()) return place.status();
  if (place->shared) {
    if (place->bytes > kSharedBytes / 2) {
      return absl::InternalError(absl::StrCat(what, ": a shared reply of ", place->bytes, " bytes"));
    }
    *payload = std::string_view(process.shared + kSharedBytes / 2, place->bytes);
    return absl::OkStatus();
  }
  if (place->bytes > (uint64_t{1} << 40)) {
    return absl::InternalError(absl::StrCat(what, ": a reply of ", place->bytes, " bytes"));
  }
  storage->resize(place->bytes);
  *payload = *storage;
  return read_exact(storage->data(), place->bytes);
}

std::string PythonPool::Discard(std::unique_ptr<Process> process, bool kill_it) {
  if (kill_it) kill(process->pid, SIGKILL);
  close(process->fd);
  if (process->shared != nullptr) munmap(process->shared, kSharedBytes);
  int status = 0;
  std::string how = "gone";
  if (waitpid(process->pid, &status, 0) == process->pid) {
    if (WIFSIGNALED(status)) {
      how = absl::StrCat("pid ", process->pid, " ended by signal ", WTERMSIG(status), " (",
                         strsignal(WTERMSIG(status)), ")");
    } else if (WIFEXITED(status)) {
      how = absl::StrCat("pid ", process->pid, " exited with ", WEXITSTATUS(status));
    }
  }
  return how;
}

absl::StatusOr<std::unique_ptr<PythonPool::Process>> PythonPool::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    auto can_go = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || live_ < settings_.processes;
    };
    mu_.Await(absl::Condition(&can_go));
    if (!idle_.empty()) {
      std::unique_ptr<Process> process = std::move(idle_.back());
      idle_.pop_back();
      return process;
    }
    ++live_;  // this caller starts one, outside the lock
  }
  absl::StatusOr<std::unique_ptr<Process>> started = Spawn();
  if (!started.ok()) {
    absl::MutexLock lock(&mu_);
    --live_;
  }
  return started;
}

void PythonPool::Release(std::unique_ptr<Process> process) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(process));
}

absl::Status PythonPool::StartAll() {
  // All at once: each imports the operator's modules (torch takes seconds),
  // which would otherwise hold up the first calls of a read.
  const int64_t count = settings_.processes;
  std::vector<absl::StatusOr<std::unique_ptr<Process>>> started(count);
  {
    std::vector<std::thread> threads;
    for (int64_t i = 0; i < count; ++i) threads.emplace_back([this, &started, i] { started[i] = Acquire(); });
    for (std::thread& t : threads) t.join();
  }
  absl::Status first_error;
  for (auto& process : started) {
    if (process.ok()) {
      Release(*std::move(process));
    } else if (first_error.ok()) {
      first_error = process.status();
    }
  }
  return first_error;
}

absl::StatusOr<Element> PythonPool::Call(const std::string& what, const PythonFrame& request) {
  absl::StatusOr<std::unique_ptr<Process>> acquired = Acquire();
  if (!acquired.ok()) return acquired.status();
  std::unique_ptr<Process> process = *std::move(acquired);
  absl::Status status = SendFrame(process->fd, process->shared, kSharedBytes / 2, request);
  if (!status.ok()) {
    // An idle process that died since its last call (the OOM killer, an
    // operator's kill): this call did nothing to it, so it gets a new one.
    Discard(std::move(process), true);
    {
      absl::MutexLock lock(&mu_);
      --live_;
    }
    acquired = Acquire();
    if (!acquired.ok()) return acquired.status();
    process = *std::move(acquired);
    status = SendFrame(process->fd, process->shared, kSharedBytes / 2, request);
  }
  std::string header, storage;
  std::string_view payload;
  if (status.ok()) status = ReadFrame(*process, settings_.call_timeout_ms, what, &header, &payload, &storage);
  if (!status.ok()) {
    const std::string ended = Discard(std::move(process), true);
    {
      absl::MutexLock lock(&mu_);
      --live_;
    }
    return absl::Status(
        status.code() == absl::StatusCode::kUnavailable ? absl::StatusCode::kInternal : status.code(),
        absl::StrCat(status.message(), " (", ended, "); ", owner_, " starts another for the next call"));
  }
  // Decoded before the process goes back: the reply may lie in its memory.
  absl::StatusOr<Element> element = DecodePythonReply(header, payload, what);
  Release(std::move(process));
  return element;
}

}  // namespace sluice
