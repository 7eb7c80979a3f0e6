// DispatcherImpl: the dispatcher's logic and locking. Requests come in as
// protos (from the thin gRPC adapter) and go out as absl::Status.
//
// Glossary (see docs/design.md): a dataset is a registered DatasetDef; a
// job is a use of a dataset in one processing mode, shared by name; an
// iteration is one repetition of a job; a task is one worker's share of an
// iteration; a split is a range of source positions; a consumer (iteration
// client) is a reader of an iteration.
//
// Protocol:
//  1. A client registers its dataset (deduplicated by fingerprint), gets or
//     creates a job, then an iteration for its next repetition, and gets an
//     iteration-client id.
//  2. Creating an iteration makes one task per live worker; a worker that
//     registers later gets a task for every unfinished iteration.
//  3. Workers learn their tasks from a push (ProcessTask) or, failing
//     that, their heartbeats, and run them. In
//     distributed_epoch they pull splits (GetSplits) from the iteration's
//     split provider, several per call.
//  4. Clients learn the tasks (and their workers) from heartbeats and read
//     elements from the workers. A worker reports a task finished once its
//     pipeline ended; the iteration is finished when all its tasks are.
//  5. A worker that shuts down, stops heartbeating for worker_timeout_ms,
//     restarts (a new incarnation), or is reported unreachable while
//     silent by a client with a task there, is removed: its tasks end and
//     their undelivered splits go to other tasks, made anew if no task can
//     take them. A worker that heartbeats but that an iteration's clients
//     cannot reach for worker_timeout_ms loses only that iteration's tasks
//     (one tenant must not end another's), and stays.
//  6. An iteration without clients for job_gc_timeout_ms is collected: it
//     counts as finished and its workers drop its tasks.
#ifndef SLUICE_DISPATCHER_DISPATCHER_IMPL_H_
#define SLUICE_DISPATCHER_DISPATCHER_IMPL_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dispatcher/client_activity.h"
#include "dispatcher/client_secrets.h"
#include "dispatcher/crash_loop_bound.h"
#include "dispatcher/dispatcher_config.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/journal.h"
#include "dispatcher/request_checks.h"
#include "dispatcher/split_leaser.h"
#include "dispatcher/status_views.h"
#include "dispatcher/worker_activity.h"
#include "pipeline/builder.h"
#include "pipeline/dataset.h"
#include "pipeline/split_provider.h"
#include "service/metrics.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// Wall-clock milliseconds since the epoch, for what people read.
int64_t UnixMillis();

// The exit status of a dispatcher that could not write its journal.
inline constexpr int kJournalFailureExitCode = 3;

// A client's report that it cannot reach a worker (where its iteration has
// a task) removes the worker only if the dispatcher has not heard from it
// for this long either.
inline constexpr auto kUnreachableWorkerSilence = std::chrono::milliseconds(2000);
// Clients released for silence that the dispatcher remembers, to take
// them back or to say what happened.
inline constexpr size_t kMaxReleasedClientsKept = 100000;
// A deterministic job's leases cover at most this many elements (at
// least one split): an ordered reader holds what a worker runs ahead of
// the split it waits for, and the worker's buffer (8192 elements at most)
// must hold one lease's output, or the ahead worker stalls.
inline constexpr int64_t kDeterministicLeaseElements = 1024;
// A peer of a shared iteration unheard this long (ten heartbeats) when the
// iteration ends holds the end back until it is heard again or released.
inline constexpr auto kSilentPeerAtEnd = std::chrono::milliseconds(1000);
// How the lost reason of a task whose readers cannot reach its (live)
// worker begins: such a loss is no crash, and MayRunIn keeps the task's
// iteration off that worker.
inline constexpr char kUnreachableReason[] = "unreachable from clients";

class DispatcherImpl {
 public:
  // Hands a task just created to its worker at once; must not block. Null:
  // workers learn of tasks from their heartbeats only.
  using TaskPushFn = std::function<void(const std::string& worker_address, const proto::TaskDef& task)>;

  // Told once when the journal cannot be written: the state in memory is
  // then ahead of the disk, and the process should end so that a restart
  // recovers what is journaled (dispatcherd's main exits with
  // kJournalFailureExitCode). Every update after it is refused with the
  // same status either way.
  using JournalFailureFn = std::function<void(const absl::Status& status)>;

  explicit DispatcherImpl(DispatcherConfig config, TaskPushFn push_task = nullptr,
                          JournalFailureFn on_journal_failure = nullptr);
  ~DispatcherImpl();
  DispatcherImpl(const DispatcherImpl&) = delete;
  DispatcherImpl& operator=(const DispatcherImpl&) = delete;

  // Recovers the state journaled in work_dir (if set), then starts the
  // thread that removes workers whose heartbeats stopped. An error (a
  // damaged journal) names the file and byte offset.
  absl::Status Start();

  // Each RPC takes its caller (the gRPC adapter's RpcAuthenticator says
  // who): a tenant sees and makes only its own datasets, jobs and
  // iterations; the default Caller is the cluster, which sees all.
  absl::Status GetVersion(const proto::GetVersionRequest& request, proto::GetVersionResponse* response,
                          const Caller& caller = {});
  absl::Status GetOrRegisterDataset(const proto::GetOrRegisterDatasetRequest& request,
                                    proto::GetOrRegisterDatasetResponse* response, const Caller& caller = {});
  absl::Status GetDatasetInfo(const proto::GetDatasetInfoRequest& request,
                              proto::GetDatasetInfoResponse* response, const Caller& caller = {});
  absl::Status GetOrCreateJob(const proto::GetOrCreateJobRequest& request,
                              proto::GetOrCreateJobResponse* response, const Caller& caller = {});
  absl::Status GetOrCreateIteration(const proto::GetOrCreateIterationRequest& request,
                                    proto::GetOrCreateIterationResponse* response, const Caller& caller = {});
  absl::Status ClientHeartbeat(const proto::ClientHeartbeatRequest& request,
                               proto::ClientHeartbeatResponse* response, const Caller& caller = {});
  absl::Status ReleaseIterationClient(const proto::ReleaseIterationClientRequest& request,
                                      proto::ReleaseIterationClientResponse* response,
                                      const Caller& caller = {});
  absl::Status WorkerHeartbeat(const proto::WorkerHeartbeatRequest& request,
                               proto::WorkerHeartbeatResponse* response, const Caller& caller = {});
  absl::Status WorkerUpdates(const proto::WorkerUpdatesRequest& request,
                             proto::WorkerUpdatesResponse* response, const Caller& caller = {});
  absl::Status WorkerShutdown(const proto::WorkerShutdownRequest& request,
                              proto::WorkerShutdownResponse* response, const Caller& caller = {});
  absl::Status GetSplits(const proto::GetSplitsRequest& request, proto::GetSplitsResponse* response,
                         const Caller& caller = {});
  absl::Status GetWorkers(const proto::GetWorkersRequest& request, proto::GetWorkersResponse* response,
                          const Caller& caller = {});
  absl::Status GetStatus(const proto::GetStatusRequest& request, proto::StatusSnapshot* response,
                         const Caller& caller = {});

  // The secret GetOrCreateIteration gave `iteration_client_id`, for
  // in-process callers (tests) acting for a client they made.
  std::string ClientSecretOf(int64_t iteration_client_id) const {
    return client_secrets_.For(iteration_client_id);
  }

  // dispatcher_status.cc: the status page's data (docs/operations.md), and
  // the state's gauges (sluice_workers, sluice_jobs, sluice_iterations
  // by state, ...; per tenant, sluice_tenant_*) in `registry`, computed
  // at each scrape. A tenant's status shows every worker but only its own
  // datasets, jobs, iterations and tasks, and neither the workers'
  // throughput nor the recent errors, which belong to every tenant.
  std::string StatusJson(const Caller& caller = {});
  void ExportMetrics(MetricsRegistry& registry);

 private:
  using Clock = std::chrono::steady_clock;
  using NewTasks = std::vector<std::pair<std::string, proto::TaskDef>>;

  // The methods are defined by job: the core and the client side in
  // dispatcher_impl.cc and dispatcher_clients.cc, the worker side in dispatcher_workers.cc, losing
  // workers and clients and collecting what is over in liveness.cc, the
  // status RPCs in dispatcher_status.cc.

  // dispatcher_impl.cc
  // Applies an update to the state and journals it before the lock is
  // released; a journal that cannot be written is reported to
  // on_journal_failure_, and this and every later update fail with it.
  absl::Status Apply(const proto::Update& update) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Apply for an update whose failure no caller can be told of (the
  // monitor thread, what follows a loss): logs it, naming `what` failed,
  // and says whether it applied.
  bool ApplyOrLog(const proto::Update& update, const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Recover() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compacts the journal into a snapshot; one too large to be read back
  // is logged and skipped, not an error.
  absl::Status WriteSnapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The splits of a job's dataset (`params.dataset_id`, defined by `def`).
  absl::StatusOr<std::unique_ptr<SplitProvider>> NewSplitProvider(const proto::JobParams& params,
                                                                  const proto::DatasetDef& def,
                                                                  int64_t repetition)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushTasks(const NewTasks& new_tasks) const;
  // How splits are cut, which a saved read records (a restore under
  // another layout is refused).
  // How the splits of a job's dataset are cut, which a saved read records
  // so that a restore under another cut is refused: elements_per_split,
  // and for an exactly_once job cut along its batches, the split size and
  // how many files or elements the source had (a folder that changed
  // would give split numbers other meanings).
  std::string SplitLayout(const proto::JobParams& params) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SplitOptions SplitOptionsFor(const proto::JobParams& params) const;
  // The source's split facts for a dataset, listed once (files) and kept.
  const absl::StatusOr<SourceSplitInfo>& SourceSplits(const std::string& dataset_id,
                                                      const proto::DatasetDef& def)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The built dataset of a registered id, built once and cached.
  absl::StatusOr<DatasetPtr> Built(const std::string& dataset_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task that joins a running iteration serves coordinated reads only
  // from the round after the horizon.
  absl::Status CreateTask(int64_t iteration_id, const std::string& worker_address,
                          bool joins_running_iteration = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // dispatcher_clients.cc
  // At the end of a shared iteration, for `client_id`'s heartbeat: a peer
  // released for silence lost what it had taken (DataLoss), and while a
  // peer is silent the end is held back (it may be dead).
  void CheckPeersAtEnd(const DispatcherState::Iteration& iteration, int64_t client_id,
                       proto::ClientHeartbeatResponse* response) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The restore proof of `job` ("" without auth), and the check of a
  // restore's: PermissionDenied unless it is the job's.
  std::string RestoreKey(const DispatcherState::Job& job, int64_t repetition) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckRestoreKey(const DispatcherState::Job& job,
                               const proto::GetOrCreateIterationRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PermissionDenied naming `rpc` unless `presented` is the client's secret.
  absl::Status CheckClientSecret(absl::string_view rpc, int64_t iteration_client_id,
                                 const std::string& presented) const;
  // client_secrets_.ForTask(task_id), computed once: every client
  // heartbeat carries the read secret of each of its iteration's tasks.
  const std::string& ReadSecretOf(int64_t task_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // dispatcher_workers.cc
  void FillTaskDef(const DispatcherState::Task& task, proto::TaskDef* def) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `address` may be given a task in `iteration`: not after its
  // task there was lost in parallel_epochs (its epoch would be read
  // twice), nor after clients could not reach it there; never in a
  // failed iteration.
  bool MayRunIn(const DispatcherState::Iteration& iteration, const std::string& address) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // liveness.cc
  // The monitor thread: removes workers whose heartbeats stopped, releases
  // silent clients and collects what is over, until stopping_.
  void RunMonitor();
  // Removes a worker, its unfinished tasks lost for `reason`, and finds
  // takers for its undelivered splits.
  void RemoveWorker(const std::string& address, const std::string& reason, NewTasks* new_tasks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the loss of `task` (just lost, for `reason`) towards its
  // iteration's crash loop, and fails the iteration at kCrashLoopLosses.
  void NoteLostTask(const DispatcherState::Task& task, const std::string& reason, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A client of `iteration_id` reports `address` unreachable. Workers are
  // shared by tenants and any client may send a report, so one tenant must
  // not end another's tasks: a report counts only from a client whose
  // iteration has a task there not yet lost or read to its end, and ends
  // only that iteration's tasks. Once that iteration's clients have
  // reported it for worker_timeout_ms while it still heartbeats, its tasks
  // there end as lost (LoseTask, kUnreachableReason; MayRunIn then keeps
  // the iteration off the worker) and the worker stays. A worker also
  // silent for kUnreachableWorkerSilence is removed (it is about to time
  // out anyway).
  void NoteUnreachable(int64_t iteration_id, const std::string& address, NewTasks* new_tasks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes a task, on the least busy live worker, for every iteration whose
  // returned splits no task can take.
  void AssignReturnedSplits(NewTasks* new_tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails an iteration (journaled) for `message`; its readers get it.
  void FailIteration(int64_t iteration_id, absl::StatusCode code, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops what this process keeps about an iteration that reads no more
  // (collected, failed or removed): its split provider and timers.
  void ForgetIteration(int64_t iteration_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes back a client released for silence, or says what happened.
  absl::StatusOr<int64_t> ResumeReleasedClient(int64_t iteration_client_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clients silent for client_timeout_ms are released (and remembered).
  void ReleaseSilentClients(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CollectAbandonedIterations(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Jobs whose iterations are all over and without clients, and datasets
  // that no job uses, after job_retention_ms: removed from the state (and
  // so from the journal at its next snapshot).
  void CollectFinishedJobs(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // dispatcher_status.cc
  // What dispatcher/status_views.h reads, valid while the lock is held.
  StatusSources StatusSourcesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Splits of a distributed_epoch iteration, or -1 when not known.
  int64_t SplitsTotal(const DispatcherState::Iteration& iteration, const proto::JobParams& params) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const DispatcherConfig config_;
  const TaskPushFn push_task_;
  const JournalFailureFn on_journal_failure_;

  // Set before any request and constant after: read without the lock.
  // client_secrets_ is set once in Start.
  const Clock::time_point created_ = Clock::now();
  ClientSecrets client_secrets_;
  // Under config_.restore_key_secret, when set.
  const std::optional<ClientSecrets> restore_keys_ =
      config_.restore_key_secret.empty()
          ? std::nullopt
          : std::optional<ClientSecrets>(ClientSecrets::WithKey(config_.restore_key_secret));

  // State below is protected by mu_.
  absl::Mutex mu_;
  DispatcherState state_ ABSL_GUARDED_BY(mu_);
  std::optional<Journal> journal_ ABSL_GUARDED_BY(mu_);
  // The size of the last snapshot written, which the journal may reach
  // before the next.
  int64_t last_snapshot_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Set once the journal could not be written; every update is refused.
  absl::Status journal_failure_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, DatasetPtr> built_datasets_ ABSL_GUARDED_BY(mu_);
  // distributed_epoch iterations' split providers.
  SplitLeaser split_leaser_ ABSL_GUARDED_BY(mu_);
  // When each worker was last heard, and how fast it sends.
  WorkerActivity worker_activity_ ABSL_GUARDED_BY(mu_);
  // Each dataset's source as DescribeSourceSplits lists it, for split
  // layouts and the status page's totals; see SourceSplits.
  std::map<std::string, absl::StatusOr<SourceSplitInfo>> source_splits_ ABSL_GUARDED_BY(mu_);
  // When each client was last heard, whether it was told its tasks, and
  // the clients released for silence.
  ClientActivity client_activity_ ABSL_GUARDED_BY(mu_){kMaxReleasedClientsKept};
  // Workers that an iteration's clients report unreachable, by (iteration
  // id, worker address): the first and the latest report of the current
  // run of reports.
  std::map<std::pair<int64_t, std::string>, std::pair<Clock::time_point, Clock::time_point>>
      unreachable_reports_ ABSL_GUARDED_BY(mu_);
  // ReadSecretOf's, until the task's iteration is forgotten. An HMAC costs
  // about 1.4 us here; a heartbeat of an iteration on 10,000 workers would
  // otherwise spend 14 ms under mu_ on them.
  absl::flat_hash_map<int64_t, std::string> task_read_secrets_ ABSL_GUARDED_BY(mu_);
  // When each unfinished task was made (or this dispatcher started), and
  // each iteration's run of losses of short-lived tasks.
  CrashLoopBound crash_loop_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads: the furthest round a consumer of each iteration has
  // reported.
  std::map<int64_t, int64_t> iteration_rounds_ ABSL_GUARDED_BY(mu_);
  // Since when each job has been over, and each dataset unused.
  std::map<int64_t, Clock::time_point> job_idle_since_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Clock::time_point> dataset_idle_since_ ABSL_GUARDED_BY(mu_);
  // Since when each uncollected iteration has had no client.
  std::map<int64_t, Clock::time_point> iteration_idle_since_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread monitor_;
  // Last: unregistered first, before the state their callbacks read.
  std::vector<MetricCallbackHandle> metric_handles_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_DISPATCHER_IMPL_H_
