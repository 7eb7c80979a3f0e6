// Shared by the service benchmarks (data_plane, service_bench): starting
// dispatcherd and workerd as children on 127.0.0.1 and making sure every
// exit path (normal, error, SIGINT/SIGTERM, the watchdog) kills them.
// Each benchmark includes this once and sets g_program in main.
#ifndef SLUICE_BENCH_BENCH_DAEMONS_H_
#define SLUICE_BENCH_BENCH_DAEMONS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "service/dispatcher_client.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"

namespace {

// The name in messages, set by main.
const char* g_program = "bench";

using Clock = std::chrono::steady_clock;

// Child processes. Their ids live in a fixed array that the signal handlers
// read, so that every exit path can kill them.
constexpr int kMaxChildren = 8;
volatile pid_t g_children[kMaxChildren] = {};

void KillChildrenNow() {
  for (int i = 0; i < kMaxChildren; ++i) {
    const pid_t pid = g_children[i];
    if (pid > 0) kill(pid, SIGKILL);
  }
}

void OnSignal(int sig) {
  KillChildrenNow();
  for (int i = 0; i < kMaxChildren; ++i) {
    if (g_children[i] > 0) waitpid(g_children[i], nullptr, 0);
  }
  const char* message = sig == SIGALRM ? ": watchdog expired; killed the daemons, giving up\n"
                                       : ": interrupted; killed the daemons\n";
  (void)!write(STDERR_FILENO, g_program, strlen(g_program));
  (void)!write(STDERR_FILENO, message, strlen(message));
  _exit(sig == SIGALRM ? 3 : 128 + sig);
}

void InstallHandlers(unsigned watchdog_seconds) {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGALRM}) sigaction(sig, &action, nullptr);
  std::atexit([] {
    KillChildrenNow();
    for (int i = 0; i < kMaxChildren; ++i) {
      if (g_children[i] > 0) waitpid(g_children[i], nullptr, 0);
      g_children[i] = 0;
    }
  });
  alarm(watchdog_seconds);
}

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", g_program, message.c_str());
  std::exit(1);  // the atexit handler kills the children
}

// Starts argv[0] (a path) with stdout and stderr appended to `log_path`.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int slot = 0;
  while (slot < kMaxChildren && g_children[slot] != 0) ++slot;
  if (slot == kMaxChildren) Fail("too many child processes");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) Fail(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  g_children[slot] = pid;
  return pid;
}

void Forget(pid_t pid) {
  for (int i = 0; i < kMaxChildren; ++i)
    if (g_children[i] == pid) g_children[i] = 0;
}

// The child's exit code once it has exited (reaping it), or nullopt while
// it runs; waits up to `timeout`.
std::optional<int> WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      Forget(pid);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (Clock::now() >= give_up) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  if (!WaitFor(pid, std::chrono::seconds(3))) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    Forget(pid);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string WaitForFile(const std::string& path, pid_t writer, std::chrono::seconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (Clock::now() < give_up) {
    std::string content = ReadFile(path);
    if (!content.empty()) return content;
    int status = 0;
    if (waitpid(writer, &status, WNOHANG) == writer) {
      Forget(writer);
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

std::string LoadAverage() {
  std::string text = ReadFile("/proc/loadavg");
  std::istringstream in(text);
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

// ---------------------------------------------------------------------------
// A dispatcherd and one workerd on 127.0.0.1.

struct Cluster {
  std::string dir;
  pid_t dispatcher = 0;
  pid_t worker = 0;
  std::string address;  // of the dispatcher
  std::string worker_address;
  std::string url() const { return "grpc://" + address; }
};

int RegisteredWorkers(const std::string& address) {
  sluice::DispatcherClient dispatcher(address);
  sluice::proto::GetWorkersResponse response;
  if (!dispatcher.GetWorkers({}, &response, {.attempt_timeout = std::chrono::seconds(2)}).ok()) return -1;
  return response.workers_size();
}

// dispatcherd and one workerd (heartbeat every 100 ms) on 127.0.0.1, logs
// and port files in `dir`; returns once the worker has registered.
[[maybe_unused]] Cluster StartCluster(const std::string& dir,
                                      const std::vector<std::string>& dispatcher_args = {}) {
  Cluster cluster;
  cluster.dir = dir;
  const std::string dispatcher_port = dir + "/dispatcher.port";
  std::vector<std::string> argv = {SLUICE_DISPATCHERD, "--port",      "0",
                                   "--bind-address",   "127.0.0.1",   "--port-file",
                                   dispatcher_port,    "--log-level", "warn"};
  argv.insert(argv.end(), dispatcher_args.begin(), dispatcher_args.end());
  cluster.dispatcher = Spawn(argv, dir + "/dispatcher.log");
  const std::string port = WaitForFile(dispatcher_port, cluster.dispatcher, std::chrono::seconds(20));
  if (port.empty()) Fail("dispatcherd did not start; its log:\n" + ReadFile(dir + "/dispatcher.log"));
  cluster.address = "127.0.0.1:" + std::to_string(std::stoi(port));
  const std::string worker_port = dir + "/worker.port";
  cluster.worker =
      Spawn({SLUICE_WORKERD, "--dispatcher", cluster.address, "--port", "0", "--bind-address", "127.0.0.1",
             "--heartbeat-interval-ms", "100", "--log-level", "warn", "--port-file", worker_port},
            dir + "/worker.log");
  const std::string bound = WaitForFile(worker_port, cluster.worker, std::chrono::seconds(20));
  if (bound.empty()) Fail("workerd did not start; its log:\n" + ReadFile(dir + "/worker.log"));
  cluster.worker_address = "127.0.0.1:" + std::to_string(std::stoi(bound));
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while (RegisteredWorkers(cluster.address) != 1) {
    if (Clock::now() > give_up)
      Fail("the worker did not register; its log:\n" + ReadFile(dir + "/worker.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cluster;
}

// What the worker holds at the end: tasks it lists, elements and bytes
// buffered, and its resident memory.
[[maybe_unused]] std::string WorkerSummary(const Cluster& cluster) {
  auto stub = sluice::proto::WorkerService::NewStub(sluice::MakeChannel(cluster.worker_address));
  sluice::proto::WorkerStatusResponse status;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  std::string text;
  if (stub->GetStatus(&context, sluice::proto::WorkerStatusRequest{}, &status).ok()) {
    text = std::to_string(status.tasks_size()) + " task(s), " + std::to_string(status.buffered_elements()) +
           " element(s) / " + std::to_string(status.buffered_bytes() >> 20) + " MiB buffered, ";
  }
  std::istringstream in(ReadFile("/proc/" + std::to_string(cluster.worker) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0)
      return text + std::to_string(std::atoll(line.c_str() + 6) / 1024) + " MiB resident";
  }
  return text;
}

}  // namespace

#endif  // SLUICE_BENCH_BENCH_DAEMONS_H_
