// Denial of service from this host, against the real dispatcherd and
// workerd (findings 9 and 10):
//  - another local user (uid 65534, no token) connects to the worker's
//    abstract shared-memory socket, which /proc/net/unix names to anyone,
//    holds 100 connections and then connects and closes in a loop: the
//    worker refuses that uid at accept, so an honest reader still reads
//    through shared memory, and the refusals take a line a second in the
//    worker's log, not one each;
//  - 300 slowloris and 100 idle connections to each daemon's HTTP port do
//    not keep /healthz (Kubernetes' liveness probe), /metrics or
//    /status.json from answering, and the server closes the slow ones.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/metrics.h"
#include "sluice/dataset.h"
#include "tests/integration/captured_warnings.h"
#include "tests/integration/test_cluster.h"
#include "tests/testing/raw_connection.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::CountOf;
using testing::RawConnection;
using testing::TestCluster;
using namespace std::chrono_literals;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------
// Finding 9: the shared-memory socket.

// The worker's abstract shared-memory socket as any local user finds it,
// in /proc/net/unix ("@sluice-worker-PID-RANDOM"), without the '@'; ""
// when it is not listed within 10 s.
std::string WorkerSocketName(pid_t worker) {
  const std::string prefix = absl::StrCat("@sluice-worker-", worker, "-");
  const auto give_up = Clock::now() + 10s;
  while (Clock::now() < give_up) {
    std::ifstream table("/proc/net/unix");
    for (std::string line; std::getline(table, line);) {
      const size_t at = line.find(prefix);
      if (at != std::string::npos) return line.substr(at + 1);
    }
    std::this_thread::sleep_for(20ms);
  }
  return "";
}

// This process's readers' count of `metric` (a counter with its labels).
double ClientCount(const std::string& metric) {
  std::istringstream lines(ProcessMetrics().Render());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(metric + " ", 0) == 0) return std::stod(line.substr(metric.size() + 1));
  }
  return 0;
}

// What the attacking child reports on its pipe.
struct AttackReport {
  int32_t held = -1;    // connections it opened and keeps, silent
  int64_t cycles = -1;  // connects (each closed at once) in its loop
};

// A child process that becomes uid 65534 and attacks the socket at
// `address`: holds 100 silent connections, says how many it got, then
// connects and closes for `loop_ms`, says how many times, and exits. It
// makes only system calls (it is forked from a threaded process). The
// destructor kills it if it still runs.
class LocalAttacker {
 public:
  LocalAttacker(const sockaddr_un& address, socklen_t length, int loop_ms) {
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      close(fds[0]);
      if (setuid(65534) != 0) _exit(2);
      int32_t held = 0;
      for (int i = 0; i < 100; ++i) {
        const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        held += connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0 ? 1 : 0;
      }
      if (write(fds[1], &held, sizeof(held)) != sizeof(held)) _exit(3);
      timespec start{};
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &start);
      int64_t cycles = 0;
      do {
        const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        cycles += connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0 ? 1 : 0;
        close(fd);
        clock_gettime(CLOCK_MONOTONIC, &now);
      } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < loop_ms);
      if (write(fds[1], &cycles, sizeof(cycles)) != sizeof(cycles)) _exit(3);
      _exit(0);
    }
    close(fds[1]);
    report_ = fds[0];
  }
  ~LocalAttacker() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(report_);
  }
  LocalAttacker(const LocalAttacker&) = delete;
  LocalAttacker& operator=(const LocalAttacker&) = delete;

  // Reads `size` bytes of the report, waiting at most `timeout`; false on
  // an early end (the child failed) or the timeout.
  bool Read(void* into, size_t size, milliseconds timeout) {
    const auto give_up = Clock::now() + timeout;
    size_t got = 0;
    while (got < size && Clock::now() < give_up) {
      pollfd readable{report_, POLLIN, 0};
      if (poll(&readable, 1, 50) <= 0) continue;
      const ssize_t n = read(report_, static_cast<char*>(into) + got, size - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return got == size;
  }
  // Its exit code, or -1 when it has not exited within `timeout` (it is
  // then killed).
  int Wait(milliseconds timeout) {
    const auto give_up = Clock::now() + timeout;
    while (Clock::now() < give_up) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int report_ = -1;
  bool reaped_ = false;
};

// Reads Range(n) from the service to its end: true when every element came
// exactly once.
bool ReadsRangeOnce(const std::string& service, int64_t n) {
  std::vector<int64_t> values;
  const absl::Status status =
      testing::ReadToEnd(Dataset::Range(n).ReadFromService({.service = service}), &values);
  INFO(status.ToString());
  CHECK(status.ok());
  std::sort(values.begin(), values.end());
  std::vector<int64_t> expected(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) expected[static_cast<size_t>(i)] = i;
  return values == expected;
}

TEST_CASE("local denial: another uid flooding the shared-memory socket keeps readers on it, the log quiet",
          "[service][security][shared_memory]") {
  if (getuid() != 0) {
    WARN("skipped: connecting to the worker's socket as another uid (65534) needs root");
    return;
  }
  testing::CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 1, .worker_args = {"--log-level", "info"}});
  const std::string name = WorkerSocketName(cluster.worker(0).pid());
  REQUIRE(!name.empty());
  // Made before the fork: the child only makes system calls.
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  REQUIRE(name.size() < sizeof(address.sun_path) - 1);
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());

  const double framed_before = ClientCount("sluice_client_responses_total{form=\"frame\"}");
  const double shared_before = ClientCount("sluice_client_shared_memory_responses_total");
  constexpr int kLoopMs = 3000;
  LocalAttacker attacker(address, length, kLoopMs);
  AttackReport report;
  REQUIRE(attacker.Read(&report.held, sizeof(report.held), 10s));
  // The worker's backlog takes them all; it closes each at accept.
  CHECK(report.held == 100);

  // While the loop runs, each read opens a session of its own and reads
  // every element, once, through the worker's memory.
  const Clock::time_point loop_started = Clock::now();
  int reads = 0;
  do {
    INFO("read " << reads);
    CHECK(ReadsRangeOnce(cluster.ServiceUrl(), 20000));
    ++reads;
  } while (Clock::now() < loop_started + milliseconds(kLoopMs));
  REQUIRE(attacker.Read(&report.cycles, sizeof(report.cycles), 10s));
  CHECK(attacker.Wait(5s) == 0);
  CHECK(report.cycles > 1000);
  // After the attack the worker serves as before.
  CHECK(ReadsRangeOnce(cluster.ServiceUrl(), 1000));
  ++reads;

  const double framed = ClientCount("sluice_client_responses_total{form=\"frame\"}") - framed_before;
  const double shared = ClientCount("sluice_client_shared_memory_responses_total") - shared_before;
  CHECK(framed >= reads);
  CHECK(shared == framed);  // none over TCP
  CHECK(warnings.messages().empty());

  const std::string opened = absl::StrCat("opened: reader pid ", getpid(), ", ");
  const auto give_up = Clock::now() + 10s;
  std::string log = testing::ReadFileOrEmpty(cluster.worker(0).log_path());
  while (CountOf(log, opened) < reads && Clock::now() < give_up) {
    std::this_thread::sleep_for(20ms);
    log = testing::ReadFileOrEmpty(cluster.worker(0).log_path());
  }
  INFO(log);
  INFO(report.held << " held, " << report.cycles << " connect/close cycles, " << reads << " reads");
  CHECK(CountOf(log, opened) == reads);
  // 100 + thousands of refusals in ~3.5 s, at most a line a second, each
  // line with the count of those it stands for after the first.
  CHECK_THAT(
      log,
      Contains("shared memory: refused a connection from uid 65534: shared memory is for readers running "
               "as uid 0"));
  CHECK_THAT(log, Contains("more refusals since the last message)"));
  const int refusal_lines = CountOf(log, "refused a connection from uid 65534");
  CHECK(refusal_lines >= 1);
  CHECK(refusal_lines <= 10);
  CHECK(CountOf(log, "shared memory: ") <= 10);
  CHECK(CountOf(log, "closed a connection from uid") == 0);  // never got as far as waiting for a hello
}

// ---------------------------------------------------------------------------
// Finding 10: the HTTP port.

constexpr char kHealthy[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\nConnection: "
    "close\r\n\r\nok\n";

// The status line of GET `path` on a connection of its own (answered
// within `timeout`), or what went wrong.
std::string StatusLineOf(int port, const std::string& path, milliseconds timeout) {
  const std::string answer =
      testing::Exchange(port, absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), timeout);
  return answer.substr(0, answer.find("\r\n"));
}

// Raises this process's descriptor limit (and so its daemons') to `want`
// when it is lower and the hard limit allows.
void EnsureDescriptors(rlim_t want) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= want) return;
  limit.rlim_cur = std::min(want, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
}

// One daemon's HTTP port under attack: its attackers and its probes.
struct Target {
  std::string name;
  int port = 0;
  std::vector<std::unique_ptr<RawConnection>> slow;  // the slowloris
  std::vector<std::unique_ptr<RawConnection>> idle;  // connected, silent
  Clock::time_point opened;                          // when its attackers were all connected
  int probes = 0;
  int healthy = 0;
  double slowest_ms = 0;
  std::vector<std::string> failures;
  bool metrics_answered = false;
  bool status_answered = false;
};

TEST_CASE("local denial: slowloris and idle connections on both daemons' HTTP ports leave /healthz answering",
          "[service][security][http]") {
  constexpr int kSlow = 300;
  constexpr int kIdle = 100;
  constexpr auto kTrickle = 500ms;
  constexpr auto kAttack = 8s;  // past the 5 s request_deadline
  constexpr auto kProbeEvery = 250ms;
  constexpr auto kProbeBound = 1000ms;
  const Clock::time_point test_started = Clock::now();
  EnsureDescriptors(4096);
  testing::TempDir dir;
  TestCluster cluster(
      {.num_workers = 1,
       .dispatcher_args = {"--http-port", "0", "--http-port-file", dir.File("dispatcher.http")},
       .worker_args = {"--http-port", "0", "--http-port-file", dir.File("worker.http")}});
  Target targets[2];
  targets[0].name = "dispatcherd";
  targets[0].port = std::stoi(testing::WaitForFile(dir.File("dispatcher.http"), 10s));
  targets[1].name = "workerd";
  targets[1].port = std::stoi(testing::WaitForFile(dir.File("worker.http"), 10s));
  for (Target& target : targets) {
    INFO(target.name);
    REQUIRE(testing::Exchange(target.port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") == kHealthy);
  }

  // The attack, on a thread of its own: every connection opened, then one
  // byte of a request line that never ends on each slow one every 500 ms.
  std::atomic<bool> opened{false};
  std::atomic<bool> stop{false};
  std::thread attack([&] {
    for (Target& target : targets) {
      for (int i = 0; i < kSlow + kIdle; ++i) {
        // Interleaved, three slow ones to an idle one.
        auto& into = i % 4 == 3 && static_cast<int>(target.idle.size()) < kIdle ? target.idle : target.slow;
        into.push_back(std::make_unique<RawConnection>(target.port));
      }
      target.opened = Clock::now();
    }
    opened = true;
    const std::string line = "GET /status.json HTTP/1.1\r\n";
    const Clock::time_point end = Clock::now() + kAttack;
    for (size_t next = 0; !stop.load() && Clock::now() < end; ++next) {
      const Clock::time_point round = Clock::now();
      for (Target& target : targets) {
        for (auto& connection : target.slow) connection->Send(line.substr(next % line.size(), 1));
      }
      while (!stop.load() && Clock::now() < std::min(round + kTrickle, end))
        std::this_thread::sleep_for(10ms);
    }
  });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } joiner{stop, attack};

  const auto give_up = Clock::now() + 15s;
  while (!opened.load() && Clock::now() < give_up) std::this_thread::sleep_for(10ms);
  REQUIRE(opened.load());

  // Probes every 250 ms until the attack ends; each must be answered
  // within the bound. About once a second, /metrics and /status.json too.
  const Clock::time_point probing = Clock::now();
  for (int tick = 0; Clock::now() < probing + kAttack; ++tick) {
    const Clock::time_point round = probing + tick * kProbeEvery;
    std::this_thread::sleep_until(round);
    for (Target& target : targets) {
      const Clock::time_point start = Clock::now();
      const std::string answer =
          testing::Exchange(target.port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", kProbeBound);
      const double took = MillisecondsSince(start);
      ++target.probes;
      target.slowest_ms = std::max(target.slowest_ms, took);
      if (answer == kHealthy && took < kProbeBound.count()) {
        ++target.healthy;
      } else {
        target.failures.push_back(absl::StrCat("probe ", tick, " after ", took, " ms: ", answer));
      }
      if (tick % 4 == 2) {
        target.metrics_answered |= StatusLineOf(target.port, "/metrics", 2000ms) == "HTTP/1.1 200 OK";
        if (&target == &targets[0]) {
          target.status_answered |= StatusLineOf(target.port, "/status.json", 2000ms) == "HTTP/1.1 200 OK";
        }
      }
    }
  }
  attack.join();  // it has ended by itself: it started first

  for (Target& target : targets) {
    INFO(target.name << ": " << target.healthy << " of " << target.probes << " probes answered, slowest "
                     << target.slowest_ms << " ms");
    for (const std::string& failure : target.failures) UNSCOPED_INFO(failure);
    CHECK(target.probes >= 20);  // 32 in 8 s every 250 ms, fewer if probes lag
    CHECK(target.healthy == target.probes);
    CHECK(target.metrics_answered);
    if (&target == &targets[0]) CHECK(target.status_answered);
    // Every slow and idle connection was closed by the server: at its 5 s
    // deadline (a 408 first) or to make room for a newer one.
    const auto deadline_passed = target.opened + 5s + 2s;
    int slow_closed = 0;
    int timed_out = 0;
    for (auto& connection : target.slow) {
      const auto left =
          std::max(std::chrono::duration_cast<milliseconds>(deadline_passed - Clock::now()), 100ms);
      const RawConnection::Received received = connection->ReadToEnd(left);
      slow_closed += received.closed ? 1 : 0;
      timed_out += received.bytes.rfind("HTTP/1.1 408 Request Timeout\r\n", 0) == 0 ? 1 : 0;
    }
    int idle_closed = 0;
    for (auto& connection : target.idle) {
      const auto left =
          std::max(std::chrono::duration_cast<milliseconds>(deadline_passed - Clock::now()), 100ms);
      idle_closed += connection->ReadToEnd(left).closed ? 1 : 0;
    }
    INFO(timed_out << " slow ones answered 408");
    CHECK(target.slow.size() == kSlow);
    CHECK(target.idle.size() == kIdle);
    CHECK(slow_closed == kSlow);
    CHECK(idle_closed == kIdle);
    // Closing them is logged at most once a second.
    const std::string log = testing::ReadFileOrEmpty(&target == &targets[0] ? cluster.dispatcher().log_path()
                                                                            : cluster.worker(0).log_path());
    const double seconds = MillisecondsSince(test_started) / 1000;
    CHECK(CountOf(log, "http: closed the connection from") <= seconds + 1);
  }
  CHECK(MillisecondsSince(test_started) < 30000);
}

}  // namespace
}  // namespace sluice
