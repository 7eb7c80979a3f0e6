// TestCluster: a real dispatcherd and N workerd processes on 127.0.0.1 with
// free ports, for integration tests. Every wait is bounded, and the
// destructor kills whatever is still running.
//
//   TestCluster cluster({.num_workers = 2});
//   Dataset::Range(10).ReadFromService({.service = cluster.ServiceUrl()}).Collect();
#ifndef SLUICE_TESTS_INTEGRATION_TEST_CLUSTER_H_
#define SLUICE_TESTS_INTEGRATION_TEST_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice::testing {

// A child process with its output in a log file.
class Process {
 public:
  static absl::StatusOr<std::unique_ptr<Process>> Start(const std::vector<std::string>& argv,
                                                        const std::string& log_path);
  ~Process();
  // SIGTERM, then the exit code; SIGKILL (and -1) if it has not exited
  // within `grace`.
  int Terminate(std::chrono::milliseconds grace = std::chrono::seconds(10));
  void Kill();
  // Waits for the process to exit by itself; its exit code, or -1 after
  // `timeout`.
  int Wait(std::chrono::milliseconds timeout);
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

 private:
  Process(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
  bool reaped_ = false;
  int exit_code_ = -1;
};

// Reads a file's contents (for logs), "" when missing.
std::string ReadFileOrEmpty(const std::string& path);

// A field of /proc/PID/status, in kB for sizes ("VmRSS", "VmHWM", "VmSize")
// or a count ("Threads"); -1 when absent.
int64_t ProcStatus(pid_t pid, const std::string& field);

// Runs a command line through the shell; its exit code and stdout.
struct CommandResult {
  int exit_code = -1;
  std::string out;
};
CommandResult RunCommand(const std::string& command);

// Reads `dataset` to its end: OK, or the first error; values (when given)
// are the first component's int64 scalars. Bounded to 60 s.
// `pause_every` > 0: sleeps 5 ms after each that many elements, so that
// what a test does meanwhile lands while the read is under way.
absl::Status ReadToEnd(const Dataset& dataset, std::vector<int64_t>* values, int64_t pause_every = 0);

// A TCP port on 127.0.0.1 that was free a moment ago.
int PickFreePort();

class TestCluster {
 public:
  struct Options {
    int num_workers = 1;
    std::vector<std::string> dispatcher_args;
    std::vector<std::string> worker_args;
    // Worker i listens on worker_ports[i] when given (for a dispatcher's
    // worker_addresses); otherwise on a free port.
    std::vector<int> worker_ports;
    // Runs dispatcherd, workerd through these commands ({"prlimit",
    // "--as=N", "--"}).
    std::vector<std::string> dispatcher_launcher;
    std::vector<std::string> worker_launcher;
  };
  explicit TestCluster(Options options);
  ~TestCluster();

  // "127.0.0.1:PORT" and "grpc://127.0.0.1:PORT".
  std::string DispatcherAddress() const;
  std::string ServiceUrl() const { return "grpc://" + DispatcherAddress(); }
  const TempDir& dir() const { return dir_; }

  // Starts one more worker and waits until it is registered.
  void AddWorker();
  // SIGKILLs the dispatcher and starts it again on the same port with the
  // same arguments (so the same work dir, if any); waits until it serves.
  void RestartDispatcher();
  // SIGKILLs worker i; RestartWorker starts it again on the same port, so
  // at the same address, and waits until it is registered.
  void KillWorker(int i);
  void RestartWorker(int i);
  Process& worker(int i) { return *workers_.at(i); }
  // The port worker i listens on (its address is 127.0.0.1:PORT).
  int WorkerPort(int index) const;
  Process& dispatcher() { return *dispatcher_; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // Registered workers, as the dispatcher reports them.
  int RegisteredWorkers();
  // Waits (bounded) until the dispatcher reports `n` workers.
  void WaitForRegisteredWorkers(int n, std::chrono::milliseconds timeout = std::chrono::seconds(20));

 private:
  void StartDispatcher(int port);
  void StartWorker(int index, int port);
  const Options options_;
  TempDir dir_;
  int dispatcher_port_ = 0;
  std::unique_ptr<Process> dispatcher_;
  std::vector<std::unique_ptr<Process>> workers_;
  int dispatcher_starts_ = 0;
  std::vector<int> worker_starts_;
};

// Waits (bounded) for a file to appear with content; its content.
std::string WaitForFile(const std::string& path, std::chrono::milliseconds timeout);

// How many times `part` occurs in `text`, without overlaps (lines in a log).
int CountOf(const std::string& text, const std::string& part);

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_INTEGRATION_TEST_CLUSTER_H_
