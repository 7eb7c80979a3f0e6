#include "tests/integration/test_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "service/dispatcher_client.h"
#include "service/grpc_util.h"
#include "sluice/proto/service.grpc.pb.h"

extern char** environ;

namespace sluice::testing {

absl::StatusOr<std::unique_ptr<Process>> Process::Start(const std::vector<std::string>& argv,
                                                        const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", strerror(rc)));
  return std::unique_ptr<Process>(new Process(pid, log_path));
}

Process::~Process() { Kill(); }

int Process::Wait(std::chrono::milliseconds timeout) {
  if (reaped_) return exit_code_;
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      reaped_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() > give_up) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Process::Terminate(std::chrono::milliseconds grace) {
  if (reaped_) return exit_code_;
  kill(pid_, SIGTERM);
  const int code = Wait(grace);
  if (code == -1) Kill();
  return code;
}

void Process::Kill() {
  if (reaped_) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  exit_code_ = 128 + SIGKILL;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::istringstream status(ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/status")));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, got);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

absl::Status ReadToEnd(const Dataset& dataset, std::vector<int64_t>* values, int64_t pause_every) {
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  if (!built.ok()) return built.status();
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*built)->MakeIterator(IteratorContext{});
  if (!iterator.ok()) return iterator.status();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int64_t read = 0;
  while (std::chrono::steady_clock::now() < give_up) {
    Element element;
    bool end = false;
    if (absl::Status status = (*iterator)->GetNext(&element, &end); !status.ok() || end) return status;
    if (values != nullptr) values->push_back(element.components.at(0).data<int64_t>()[0]);
    if (pause_every > 0 && ++read % pause_every == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return absl::DeadlineExceededError("the read did not end within 60 s");
}

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

int CountOf(const std::string& text, const std::string& part) {
  int count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

std::string WaitForFile(const std::string& path, std::chrono::milliseconds timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < give_up) {
    std::string content = ReadFileOrEmpty(path);
    if (!content.empty()) return content;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

TestCluster::TestCluster(Options options) : options_(std::move(options)) {
  StartDispatcher(0);
  for (int i = 0; i < options_.num_workers; ++i) {
    StartWorker(i, i < static_cast<int>(options_.worker_ports.size()) ? options_.worker_ports[i] : 0);
  }
  WaitForRegisteredWorkers(options_.num_workers);
}

void TestCluster::StartDispatcher(int port) {
  const std::string port_file = dir_.File("dispatcher.port");
  std::remove(port_file.c_str());
  std::vector<std::string> argv = {SLUICE_DISPATCHERD, "--port",      std::to_string(port),
                                   "--bind-address",   "127.0.0.1",   "--port-file",
                                   port_file,          "--log-level", "warn"};
  argv.insert(argv.end(), options_.dispatcher_args.begin(), options_.dispatcher_args.end());
  argv.insert(argv.begin(), options_.dispatcher_launcher.begin(), options_.dispatcher_launcher.end());
  // Each run logs to its own file: dispatcher.log, then dispatcher.1.log...
  const std::string log = dir_.File(
      dispatcher_starts_ == 0 ? "dispatcher.log" : absl::StrCat("dispatcher.", dispatcher_starts_, ".log"));
  ++dispatcher_starts_;
  auto dispatcher = Process::Start(argv, log);
  REQUIRE(dispatcher.ok());
  dispatcher_ = *std::move(dispatcher);
  const std::string bound = WaitForFile(port_file, std::chrono::seconds(20));
  INFO(ReadFileOrEmpty(log));
  REQUIRE(!bound.empty());
  dispatcher_port_ = std::stoi(bound);
}

void TestCluster::RestartDispatcher() {
  dispatcher_->Kill();
  StartDispatcher(dispatcher_port_);
}

int TestCluster::WorkerPort(int index) const {
  return std::stoi(ReadFileOrEmpty(dir_.File(absl::StrCat("worker", index, ".port"))));
}

void TestCluster::KillWorker(int i) { workers_.at(i)->Kill(); }

void TestCluster::RestartWorker(int i) {
  workers_.at(i)->Kill();
  const int port = WorkerPort(i);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const int64_t killed_at = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  StartWorker(i, port);
  // Registered again once the dispatcher has heard from that address since
  // the old process died.
  DispatcherClient dispatcher(DispatcherAddress());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (true) {
    proto::GetWorkersResponse response;
    if (dispatcher.GetWorkers({}, &response, {.attempt_timeout = std::chrono::seconds(5)}).ok()) {
      for (const auto& worker : response.workers()) {
        if (worker.address() == address && worker.last_heartbeat_unix_ms() > killed_at) return;
      }
    }
    INFO("waiting for the restarted worker " << address);
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TestCluster::~TestCluster() {
  for (auto& worker : workers_) worker->Kill();
  if (dispatcher_ != nullptr) dispatcher_->Kill();
}

std::string TestCluster::DispatcherAddress() const { return absl::StrCat("127.0.0.1:", dispatcher_port_); }

void TestCluster::StartWorker(int index, int port) {
  const std::string port_file = dir_.File(absl::StrCat("worker", index, ".port"));
  std::remove(port_file.c_str());
  std::vector<std::string> argv = {SLUICE_WORKERD, "--dispatcher",       DispatcherAddress(),
                                   "--port",       std::to_string(port), "--bind-address",
                                   "127.0.0.1",    "--port-file",        port_file};
  argv.insert(argv.end(), options_.worker_args.begin(), options_.worker_args.end());
  // Quiet, unless the test sets its own level.
  if (std::find(argv.begin(), argv.end(), "--log-level") == argv.end()) {
    argv.insert(argv.end(), {"--log-level", "warn"});
  }
  // SIGTERM stops at once, as SIGINT, unless the test drains.
  if (std::find(argv.begin(), argv.end(), "--drain-timeout-ms") == argv.end()) {
    argv.insert(argv.end(), {"--drain-timeout-ms", "0"});
  }
  // Fast heartbeats, unless the test sets its own.
  if (std::find(argv.begin(), argv.end(), "--heartbeat-interval-ms") == argv.end()) {
    argv.insert(argv.end(), {"--heartbeat-interval-ms", "100"});
  }
  argv.insert(argv.begin(), options_.worker_launcher.begin(), options_.worker_launcher.end());
  if (index >= static_cast<int>(worker_starts_.size())) worker_starts_.resize(index + 1, 0);
  const int start = worker_starts_[index]++;
  const std::string log = dir_.File(start == 0 ? absl::StrCat("worker", index, ".log")
                                               : absl::StrCat("worker", index, ".", start, ".log"));
  auto worker = Process::Start(argv, log);
  REQUIRE(worker.ok());
  if (index < static_cast<int>(workers_.size())) {
    workers_[index] = *std::move(worker);
  } else {
    workers_.push_back(*std::move(worker));
  }
  INFO(ReadFileOrEmpty(log));
  REQUIRE(!WaitForFile(port_file, std::chrono::seconds(20)).empty());
}

void TestCluster::AddWorker() {
  const int before = RegisteredWorkers();
  StartWorker(num_workers(), 0);
  WaitForRegisteredWorkers(before + 1);
}

int TestCluster::RegisteredWorkers() {
  DispatcherClient dispatcher(DispatcherAddress());
  proto::GetWorkersResponse response;
  if (!dispatcher.GetWorkers({}, &response, {.attempt_timeout = std::chrono::seconds(5)}).ok()) return -1;
  return response.workers_size();
}

void TestCluster::WaitForRegisteredWorkers(int n, std::chrono::milliseconds timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (RegisteredWorkers() != n) {
    INFO("waiting for " << n << " workers; dispatcher log:\n"
                        << ReadFileOrEmpty(dir_.File("dispatcher.log")));
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace sluice::testing
