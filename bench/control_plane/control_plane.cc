// control_plane: one real dispatcherd driven by simulated workers and
// clients (SimFleet), from 100 to 10,000 workers and 1 to 1,000 clients;
// or, with --restart, its restart time against the journal's length. See
// bench/README.md, "The control plane at scale".
//
//   control_plane --workers 10000 --clients 100 --seconds 30
//   control_plane --restart 100000,1000000
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <numeric>

#include "absl/strings/str_split.h"
#include "bench/bench_daemons.h"
#include "bench/control_plane/journal_restart.h"
#include "bench/control_plane/sim_fleet.h"

namespace {

using sluice::bench::SimFleet;

struct ProcessSample {
  double cpu_seconds = 0;
  int64_t rss_bytes = 0;
  int64_t written_bytes = 0;  // wchar: every write(2), to the journal, snapshots and the log
};

ProcessSample Sample(pid_t pid) {
  ProcessSample sample;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (size_t close = stat.rfind(')'); close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    int64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stoll(field);
      if (i == 15) stime = std::stoll(field);
    }
    sample.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::istringstream status(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) sample.rss_bytes = std::stoll(line.substr(6)) * 1024;
  }
  std::istringstream io(ReadFile("/proc/" + std::to_string(pid) + "/io"));
  for (std::string line; std::getline(io, line);) {
    if (line.rfind("wchar:", 0) == 0) sample.written_bytes = std::stoll(line.substr(6));
  }
  return sample;
}

struct Dispatcher {
  pid_t pid = 0;
  std::string address;
  double start_seconds = 0;  // spawn to port file
};

Dispatcher StartDispatcher(const std::string& dir, const std::string& dispatcherd,
                           const std::string& settings) {
  std::filesystem::create_directories(dir);
  const std::string config = dir + "/dispatcher.yaml";
  const std::string port_file = dir + "/dispatcher.port";
  std::filesystem::remove(port_file);
  std::ofstream(config) << "port: 0\nport_file: " << port_file << "\nlog_level: warn\n" << settings;
  Dispatcher dispatcher;
  const Clock::time_point start = Clock::now();
  dispatcher.pid = Spawn({dispatcherd, "--config", config}, dir + "/dispatcher.log");
  const std::string port = WaitForFile(port_file, dispatcher.pid, std::chrono::seconds(600));
  if (port.empty()) Fail("dispatcherd did not start; see " + dir + "/dispatcher.log");
  dispatcher.start_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  dispatcher.address = "127.0.0.1:" + std::to_string(std::stoi(port));
  return dispatcher;
}

std::string Millis(double micros) {
  std::ostringstream out;
  out.precision(micros < 10000 ? 2 : 0);
  out << std::fixed << micros / 1000.0;
  return out.str();
}

std::string Latencies(const sluice::bench::LatencyLog::Summary& s) {
  return Millis(s.p50) + " / " + Millis(s.p99) + " / " + Millis(s.p999);
}

int RunLoad(const SimFleet::Options& base, const std::string& dispatcherd, const std::string& dir, int warmup,
            int seconds, int lose, int worker_timeout_ms) {
  const Dispatcher dispatcher =
      StartDispatcher(dir, dispatcherd,
                      "work_dir: " + dir + "/work\nworker_timeout_ms: " + std::to_string(worker_timeout_ms) +
                          "\nclient_timeout_ms: 600000\n");
  SimFleet::Options options = base;
  options.dispatcher = dispatcher.address;
  SimFleet fleet(options);
  std::printf("%s: %d workers, %d clients over %d jobs; registering...\n", g_program, options.workers,
              options.clients, options.jobs);
  std::fflush(stdout);
  const Clock::time_point registering = Clock::now();
  if (absl::Status s = fleet.Start(std::chrono::seconds(300)); !s.ok()) Fail(std::string(s.message()));
  std::printf("%s: registered and tasks handed out in %.1f s; warming up %d s\n", g_program,
              std::chrono::duration<double>(Clock::now() - registering).count(), warmup);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(warmup));
  fleet.ResetCounters();
  const ProcessSample before = Sample(dispatcher.pid);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const SimFleet::Report report = fleet.Snapshot();
  const ProcessSample after = Sample(dispatcher.pid);

  std::vector<double> detection;
  if (lose > 0 && options.clients > 0) {
    detection = fleet.LoseWorkers(lose, std::chrono::seconds(worker_timeout_ms / 1000 + 30));
  }
  const double window = report.seconds;
  const double cores = (after.cpu_seconds - before.cpu_seconds) / window;
  const double bytes_per_hour =
      static_cast<double>(after.written_bytes - before.written_bytes) / window * 3600;
  std::printf("\nwindow %.1f s, load %s\n", window, LoadAverage().c_str());
  std::printf(
      "worker heartbeats: %.0f/s (of %.0f/s due), p50/p99/p999 %s ms, max %s ms, %ld errors, %ld late\n",
      report.worker_heartbeat.calls / window,
      options.workers * 1000.0 / static_cast<double>(options.worker_heartbeat.count()),
      Latencies(report.worker_heartbeat).c_str(), Millis(report.worker_heartbeat.max).c_str(),
      static_cast<long>(report.worker_heartbeat.errors), static_cast<long>(report.late_heartbeats));
  std::printf("client heartbeats: %.0f/s, p50/p99/p999 %s ms, %ld errors, %.0f bytes per answer\n",
              report.client_heartbeat.calls / window, Latencies(report.client_heartbeat).c_str(),
              static_cast<long>(report.client_heartbeat.errors), report.client_response_bytes);
  std::printf("GetSplits: %.0f/s, %.0f splits leased/s, p50/p99/p999 %s ms, %ld errors\n",
              report.get_splits.calls / window, report.splits_leased / window,
              Latencies(report.get_splits).c_str(), static_cast<long>(report.get_splits.errors));
  std::printf("dispatcher: %.2f cores, RSS %.0f MiB, %.1f MiB/h written (journal, snapshots, log)\n", cores,
              after.rss_bytes / 1048576.0, bytes_per_hour / 1048576.0);
  std::string detected = "-";
  if (!detection.empty()) {
    std::sort(detection.begin(), detection.end());
    const int missed = static_cast<int>(std::count(detection.begin(), detection.end(), -1.0));
    std::ostringstream out;
    out.precision(2);
    out << std::fixed << detection[missed] << "-" << detection.back() << " s";
    if (missed > 0) out << " (" << missed << " never)";
    detected = out.str();
    std::printf("lost workers: %zu silenced, told to clients after %s (worker_timeout_ms %d)\n",
                detection.size(), detected.c_str(), worker_timeout_ms);
  }
  std::printf(
      "\n| workers | clients | jobs | worker hb/s | worker hb p50/p99/p999 ms | client hb/s | client hb "
      "p50/p99/p999 "
      "ms | GetSplits/s | splits/s | GetSplits p50/p99/p999 ms | dispatcher cores | RSS MiB | MiB/h written "
      "| "
      "loss told after |\n");
  std::printf("| %d | %d | %d | %.0f | %s | %.0f | %s | %.0f | %.0f | %s | %.2f | %.0f | %.0f | %s |\n",
              options.workers, options.clients, options.jobs, report.worker_heartbeat.calls / window,
              Latencies(report.worker_heartbeat).c_str(), report.client_heartbeat.calls / window,
              Latencies(report.client_heartbeat).c_str(), report.get_splits.calls / window,
              report.splits_leased / window, Latencies(report.get_splits).c_str(), cores,
              after.rss_bytes / 1048576.0, bytes_per_hour / 1048576.0, detected.c_str());
  Stop(dispatcher.pid);
  return 0;
}

int RunRestart(const std::vector<int64_t>& sizes, bool compacted, const std::string& dispatcherd,
               const std::string& dir) {
  spdlog::set_level(spdlog::level::warn);
  std::printf(
      "| updates | snapshots | journal MiB | made in s | replay in process s | dispatcherd start to serving "
      "s | "
      "dispatcherd RSS MiB |\n");
  for (int64_t updates : sizes) {
    const std::string shm_dir = "/dev/shm/sluice-control-plane-" + std::to_string(getpid());
    const std::string disk_dir = dir + "/journal-" + std::to_string(updates);
    std::filesystem::remove_all(shm_dir);
    std::filesystem::remove_all(disk_dir);
    absl::StatusOr<sluice::bench::MadeJournal> made = sluice::bench::MakeJournal(updates, compacted, shm_dir);
    if (!made.ok()) {
      std::filesystem::remove_all(shm_dir);
      Fail("making the journal: " + std::string(made.status().message()));
    }
    std::filesystem::copy(shm_dir, disk_dir, std::filesystem::copy_options::recursive);
    std::filesystem::remove_all(shm_dir);
    std::filesystem::remove(disk_dir + "/LOCK");
    int64_t bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(disk_dir)) {
      if (entry.is_regular_file()) bytes += static_cast<int64_t>(entry.file_size());
    }
    // Each recovery ends with a snapshot: dispatcherd gets a copy of its own.
    const std::string daemon_dir = disk_dir + "-dispatcherd";
    std::filesystem::copy(disk_dir, daemon_dir, std::filesystem::copy_options::recursive);
    absl::StatusOr<double> replay = sluice::bench::ReplayInProcess(disk_dir, compacted);
    if (!replay.ok()) Fail("replaying: " + std::string(replay.status().message()));
    const sluice::dispatcher::DispatcherConfig config = sluice::bench::RestartConfig(daemon_dir, compacted);
    const Dispatcher dispatcher = StartDispatcher(
        dir + "/restart-" + std::to_string(updates), dispatcherd,
        "work_dir: " + daemon_dir + "\nworker_timeout_ms: 86400000\nclient_timeout_ms: 86400000\n" +
            "job_gc_timeout_ms: 86400000\nsnapshot_interval: " + std::to_string(config.snapshot_interval) +
            "\nsnapshot_bytes: " + std::to_string(config.snapshot_bytes) + "\n");
    const ProcessSample sample = Sample(dispatcher.pid);
    Stop(dispatcher.pid);
    std::printf(
        "| %ld | %s | %.1f | %.1f | %.2f | %.2f | %.0f |\n", static_cast<long>(made->updates),
        compacted ? ("every " + std::to_string(config.snapshot_interval) + " records").c_str() : "none",
        bytes / 1048576.0, made->seconds, *replay, dispatcher.start_seconds, sample.rss_bytes / 1048576.0);
    std::fflush(stdout);
    std::filesystem::remove_all(disk_dir);
    std::filesystem::remove_all(daemon_dir);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "control_plane";
  CLI::App app{"Drives one real dispatcherd with simulated workers and clients (bench/README.md)"};
  SimFleet::Options options;
  std::string dispatcherd = SLUICE_DISPATCHERD;
  std::string dir = "/tmp/sluice-control-plane-" + std::to_string(getpid());
  int warmup = 5, seconds = 20, lose = 0, worker_timeout_ms = 5000;
  int64_t worker_heartbeat_ms = 1000, client_heartbeat_ms = 100;
  std::string restart;
  bool compacted = false;
  app.add_option("--dispatcherd", dispatcherd, "dispatcherd to run");
  app.add_option("--dir", dir, "scratch directory (logs, the journal)");
  app.add_option("--workers", options.workers, "simulated workers")->check(CLI::Range(1, 100000));
  app.add_option("--clients", options.clients, "simulated clients")->check(CLI::Range(0, 100000));
  app.add_option("--jobs", options.jobs, "shared jobs the clients are spread over")
      ->check(CLI::Range(1, 10000));
  app.add_option("--worker-heartbeat-ms", worker_heartbeat_ms, "each worker's heartbeat interval")
      ->check(CLI::Range(10, 600000));
  app.add_option("--client-heartbeat-ms", client_heartbeat_ms,
                 "each client's heartbeat interval (the SDK's: 100)")
      ->check(CLI::Range(10, 600000));
  app.add_option("--leasers", options.leasers, "GetSplits calls kept in flight")->check(CLI::Range(0, 10000));
  app.add_option("--splits-per-request", options.splits_per_request, "max_splits of each GetSplits")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--connections", options.connections, "gRPC connections the fleet shares")
      ->check(CLI::Range(1, 10000));
  app.add_option("--warmup", warmup, "seconds before measuring")->check(CLI::Range(0, 3600));
  app.add_option("--seconds", seconds, "seconds measured")->check(CLI::Range(1, 3600));
  app.add_option("--lose", lose, "workers silenced after the window, to time their loss")
      ->check(CLI::Range(0, 100000));
  app.add_option("--worker-timeout-ms", worker_timeout_ms, "the dispatcher's worker_timeout_ms")
      ->check(CLI::Range(100, 600000));
  app.add_flag("--baseline", options.baseline,
               "worker heartbeats replaced by GetVersion (gRPC alone, no state); workers time out meanwhile");
  app.add_option("--restart", restart, "instead: restart times for journals of these many updates (N,N,...)");
  app.add_flag("--compacted", compacted,
               "with --restart: default snapshots (otherwise every update is replayed)");
  CLI11_PARSE(app, argc, argv);
  options.worker_heartbeat = std::chrono::milliseconds(worker_heartbeat_ms);
  options.client_heartbeat = std::chrono::milliseconds(client_heartbeat_ms);

  // Each simulated process is a connection of the dispatcher's pusher and
  // of this fleet: raise the descriptor limit to its hard cap.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  InstallHandlers(7200);
  std::filesystem::create_directories(dir);
  int code = 0;
  if (!restart.empty()) {
    std::vector<int64_t> sizes;
    for (absl::string_view size : absl::StrSplit(restart, ','))
      sizes.push_back(std::stoll(std::string(size)));
    code = RunRestart(sizes, compacted, dispatcherd, dir);
  } else {
    code = RunLoad(options, dispatcherd, dir, warmup, seconds, lose, worker_timeout_ms);
  }
  std::filesystem::remove_all(dir);
  return code;
}
