// DispatcherCore: what every part of the dispatcher shares. The state, the
// one lock over it, the journal that every change goes through (Apply),
// the split providers and the making of tasks.
//
// The parts are classes of their own, each holding the core and named as
// friends below: JobRpcs (job_rpcs.h: datasets, jobs, iterations),
// ClientRpcs (client_rpcs.h: a client's heartbeats and release),
// WorkerRpcs (worker_rpcs.h), Liveness (liveness.h: the monitor
// thread, losses and collection) and StatusRpcs (status_rpcs.h).
// DispatcherImpl (dispatcher_impl.h) owns the core and the parts and is
// what the gRPC adapter calls. A part takes mu_ for a whole request, so a
// request is atomic whichever parts it runs through.
#ifndef SLUICE_DISPATCHER_DISPATCHER_CORE_H_
#define SLUICE_DISPATCHER_DISPATCHER_CORE_H_

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
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dispatcher/autoscaler.h"
#include "dispatcher/client_activity.h"
#include "dispatcher/client_secrets.h"
#include "dispatcher/crash_loop_bound.h"
#include "dispatcher/dispatcher_config.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/journal.h"
#include "dispatcher/split_leaser.h"
#include "dispatcher/worker_activity.h"
#include "pipeline/dataset.h"
#include "pipeline/split_provider.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// Wall-clock milliseconds since the epoch, for what people read.
int64_t UnixMillis();

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

class DispatcherCore {
 public:
  using Clock = std::chrono::steady_clock;
  // Tasks made under the lock, pushed to their workers after it.
  using NewTasks = std::vector<std::pair<std::string, proto::TaskDef>>;
  // Hands a task just created to its worker at once; must not block. Null:
  // workers learn of tasks from their heartbeats only.
  using TaskPushFn = std::function<void(const std::string& worker_address, const proto::TaskDef& task)>;
  // Told once when the journal cannot be written: the state in memory is
  // then ahead of the disk, and the process should end so that a restart
  // recovers what is journaled. Every update after it is refused with the
  // same status either way.
  using JournalFailureFn = std::function<void(const absl::Status& status)>;

  DispatcherCore(DispatcherConfig config, TaskPushFn push_task, JournalFailureFn on_journal_failure);
  DispatcherCore(const DispatcherCore&) = delete;
  DispatcherCore& operator=(const DispatcherCore&) = delete;
  // Waits for a snapshot being written.
  ~DispatcherCore();

  // Recovers the state journaled in work_dir (if set) and opens the
  // client secrets there. An error (a damaged journal) names the file and
  // byte offset.
  absl::Status Start();

  // Returns once every update applied so far is on disk (group commit:
  // Apply writes, this syncs, outside mu_). Every answer to a request
  // waits for it, so none tells of a change a crash could still undo. A
  // journal that cannot be synced fails it, as Apply.
  absl::Status WaitForJournal() ABSL_LOCKS_EXCLUDED(mu_);

  // Returns once no snapshot is being written (StartSnapshot): for tests
  // that look at the work dir.
  void WaitForSnapshot() ABSL_LOCKS_EXCLUDED(mu_);

  // The secret GetOrCreateIteration gave `iteration_client_id`.
  std::string ClientSecretOf(int64_t iteration_client_id) const {
    return client_secrets_.For(iteration_client_id);
  }

 private:
  friend class JobRpcs;
  friend class ClientRpcs;
  friend class WorkerRpcs;
  friend class Liveness;
  friend class StatusRpcs;

  // Applies an update to the state and journals it before the lock is
  // released; a journal that cannot be written is reported to
  // on_journal_failure_, and this and every later update fail with it.
  absl::Status Apply(const proto::Update& update) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Apply for an update whose failure no caller can be told of (the
  // monitor thread, what follows a loss): logs it, naming `what` failed,
  // and says whether it applied.
  bool ApplyOrLog(const proto::Update& update, const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refuses every update from now on, and tells on_journal_failure_ once.
  absl::Status FailJournal(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Recover() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compacts the journal into a snapshot; one too large to be read back
  // is logged and skipped, not an error. At start, before any request.
  absl::Status WriteSnapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compacts while serving: moves the journal to a new file and hands the
  // state's snapshot to a thread that writes it after mu_ is let go (one
  // at a time). Written, synced and renamed under the lock, a snapshot of
  // 10,000 workers' state set the p99 of every request (docs/design.md,
  // "What limits the dispatcher"). A failure to write it loses nothing:
  // the previous snapshot and every journal file since stay in place.
  absl::Status StartSnapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The splits of a job's dataset (`params.dataset_id`, defined by `def`).
  absl::StatusOr<std::unique_ptr<SplitProvider>> NewSplitProvider(const proto::JobParams& params,
                                                                  const proto::DatasetDef& def,
                                                                  int64_t repetition)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After WaitForJournal; not under mu_.
  void PushTasks(const NewTasks& new_tasks) ABSL_LOCKS_EXCLUDED(mu_);
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
  void FillTaskDef(const DispatcherState::Task& task, proto::TaskDef* def) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `address` may be given a task in `iteration`: not after its
  // task there was lost in parallel_epochs (its epoch would be read
  // twice), nor after clients could not reach it there; never in a
  // failed iteration, nor on a draining worker.
  bool MayRunIn(const DispatcherState::Iteration& iteration, const std::string& address) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const DispatcherConfig config_;
  const TaskPushFn push_task_;
  const JournalFailureFn on_journal_failure_;

  // Set before any request and constant after: read without the lock.
  // client_secrets_ is set once in Start.
  const Clock::time_point created_ = Clock::now();
  ClientSecrets client_secrets_;
  // journal_'s group commit, set once in Start (null without a work dir).
  std::shared_ptr<JournalSync> journal_sync_;
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
  // StartSnapshot's writer, and whether it is still at work.
  std::thread snapshot_writer_ ABSL_GUARDED_BY(mu_);
  bool snapshot_writing_ ABSL_GUARDED_BY(mu_) = false;
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
  // ClientRpcs::ReadSecretOf's, until the task's iteration is forgotten.
  // An HMAC costs about 1.4 us here; a heartbeat of an iteration on 10,000
  // workers would otherwise spend 14 ms under mu_ on them.
  absl::flat_hash_map<int64_t, std::string> task_read_secrets_ ABSL_GUARDED_BY(mu_);
  // When each unfinished task was made (or this dispatcher started), and
  // each iteration's run of losses of short-lived tasks.
  CrashLoopBound crash_loop_ ABSL_GUARDED_BY(mu_);
  // Names what every client's task list holds (ClientHeartbeatResponse.
  // task_list): moved on by each update that may change one, starting at
  // a random number so that a client's number from an earlier process is
  // not taken for current.
  int64_t task_lists_version_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads: the furthest round a consumer of each iteration has
  // reported.
  std::map<int64_t, int64_t> iteration_rounds_ ABSL_GUARDED_BY(mu_);
  // The autoscaling model: heartbeats store their figures in it, the
  // monitor thread evaluates it. Derived from heartbeats, not journaled.
  Autoscaler autoscaler_ ABSL_GUARDED_BY(mu_){
      AutoscalerOptions{.smoothing = std::chrono::milliseconds(config_.autoscale_smoothing_ms),
                        .scale_up_window = std::chrono::milliseconds(config_.autoscale_up_window_ms),
                        .scale_down_window = std::chrono::milliseconds(config_.autoscale_down_window_ms),
                        .max_workers = config_.autoscale_max_workers}};
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_DISPATCHER_CORE_H_
