// SimFleet: simulated workers and clients driving one real dispatcher over
// gRPC (bench/control_plane, issue 36). Workers heartbeat on a schedule,
// take the tasks the heartbeats hand them and lease splits for them;
// clients join iterations, heartbeat, and report the leased splits as
// complete, as the SDK does. No element is produced or read: GetElements
// is out of scope. Every RPC's latency is recorded by kind.
//
//   SimFleet fleet(options);
//   fleet.Start();                     // registers the workers, joins the clients
//   fleet.ResetCounters();             // after a warm-up
//   std::this_thread::sleep_for(...);  // the measured window
//   SimFleet::Report report = fleet.Snapshot();
#ifndef SLUICE_BENCH_CONTROL_PLANE_SIM_FLEET_H_
#define SLUICE_BENCH_CONTROL_PLANE_SIM_FLEET_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "sluice/proto/service.grpc.pb.h"

namespace sluice::bench {

// Latencies of one kind of RPC, in microseconds.
class LatencyLog {
 public:
  void Add(double micros, bool ok);
  void Reset();
  struct Summary {
    int64_t calls = 0;
    int64_t errors = 0;
    double p50 = 0, p99 = 0, p999 = 0, max = 0;
  };
  Summary Summarize() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<float> micros_ ABSL_GUARDED_BY(mu_);
  int64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
};

class SimFleet {
 public:
  struct Options {
    std::string dispatcher;  // HOST:PORT
    int workers = 100;
    int clients = 1;
    // Clients are spread over this many shared (named) distributed_epoch
    // jobs; each job has a task on every worker.
    int jobs = 1;
    std::chrono::milliseconds worker_heartbeat{1000};
    std::chrono::milliseconds client_heartbeat{100};
    // GetSplits calls kept in flight (0: no leasing), each asking for
    // splits_per_request splits for a random task.
    int leasers = 32;
    int splits_per_request = 16;
    // gRPC channels (TCP connections) the simulated processes share.
    int connections = 32;
    // Calls of one kind in flight at most; a call due beyond it is counted
    // as late and skipped, so an overloaded dispatcher shows as a missed
    // rate, not as an ever-growing queue.
    int max_in_flight = 4096;
    // The baseline: each due worker heartbeat is a GetVersion instead,
    // which the dispatcher answers without its lock or state: what gRPC
    // alone costs at the same rate, in the same process.
    bool baseline = false;
  };

  struct Report {
    double seconds = 0;
    LatencyLog::Summary worker_heartbeat, client_heartbeat, get_splits;
    int64_t splits_leased = 0;
    int64_t late_heartbeats = 0;       // due while max_in_flight were waiting
    int64_t tasks_known = 0;           // (worker, task) pairs the fleet holds
    double client_response_bytes = 0;  // mean ClientHeartbeat response size
  };

  explicit SimFleet(Options options);
  ~SimFleet();
  SimFleet(const SimFleet&) = delete;
  SimFleet& operator=(const SimFleet&) = delete;

  // Registers every worker (its first heartbeat), creates the jobs and
  // joins every client, then starts the schedules; returns once every
  // worker holds a task of every job, or an error.
  absl::Status Start(std::chrono::seconds timeout);
  void ResetCounters();
  Report Snapshot() const;

  // Silences `count` workers (their heartbeats stop) and returns how long
  // each took to be reported lost to a client (a lost task naming it), or
  // nullopt-like -1 for one never reported within `timeout`.
  std::vector<double> LoseWorkers(int count, std::chrono::seconds timeout);

  static std::string WorkerAddress(int index);

 private:
  struct Worker {
    std::string address;
    std::string incarnation;
    std::atomic<bool> silenced{false};
    absl::Mutex mu;
    std::vector<int64_t> tasks ABSL_GUARDED_BY(mu);
  };
  struct Client {
    int64_t job_id = 0;
    int64_t iteration_id = 0;
    int64_t client_id = 0;
    std::string secret;
  };
  struct Task {
    int64_t task_id;
    int64_t iteration_id;
  };

  proto::DispatcherService::Stub& StubFor(int index) { return *stubs_[index % stubs_.size()]; }
  void SendWorkerHeartbeat(int index, std::function<void()> done = nullptr);
  void SendClientHeartbeat(int index);
  void SendGetSplits();
  void Schedule();
  absl::Status CreateJobsAndClients();

  const Options options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<proto::DispatcherService::Stub>> stubs_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Client> clients_;
  // Each client's known_task_list, as the SDK keeps it.
  std::unique_ptr<std::atomic<int64_t>[]> known_task_lists_;

  mutable LatencyLog worker_heartbeats_, client_heartbeats_, get_splits_;
  std::atomic<int64_t> worker_in_flight_{0}, client_in_flight_{0};
  std::atomic<int64_t> late_{0}, splits_leased_{0}, request_ids_{0};
  std::atomic<int64_t> response_bytes_{0}, responses_{0};
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point window_start_;

  mutable absl::Mutex tasks_mu_;
  std::vector<Task> tasks_ ABSL_GUARDED_BY(tasks_mu_);
  std::map<int64_t, int> task_index_ ABSL_GUARDED_BY(tasks_mu_);
  // Leased split seqs per iteration, reported complete by the next
  // heartbeat of one of its clients.
  std::map<int64_t, std::vector<int64_t>> completed_ ABSL_GUARDED_BY(tasks_mu_);
  // Loss detection: when each silenced worker was first named lost.
  std::map<std::string, std::chrono::steady_clock::time_point> lost_seen_ ABSL_GUARDED_BY(tasks_mu_);
  std::atomic<int> leasers_running_{0};

  std::thread scheduler_;
};

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_CONTROL_PLANE_SIM_FLEET_H_
