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
//     restarts (a new incarnation), or is reported unreachable by a client
//     while silent, is removed: its tasks end and their undelivered splits
//     go to other tasks, made anew if no task can take them.
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
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "dispatcher/dispatcher_config.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/journal.h"
#include "pipeline/dataset.h"
#include "sluice/service.pb.h"

namespace sluice::dispatcher {

// The exit status of a dispatcher that could not write its journal.
inline constexpr int kJournalFailureExitCode = 3;

// A client's report that it cannot reach a worker removes the worker only
// if the dispatcher has not heard from it for this long either.
inline constexpr auto kUnreachableWorkerSilence = std::chrono::milliseconds(2000);

class DispatcherImpl {
 public:
  // Hands a task just created to its worker at once; must not block. Null:
  // workers learn of tasks from their heartbeats only.
  using TaskPushFn = std::function<void(const std::string& worker_address, const proto::TaskDef& task)>;

  explicit DispatcherImpl(DispatcherConfig config, TaskPushFn push_task = nullptr);
  ~DispatcherImpl();
  DispatcherImpl(const DispatcherImpl&) = delete;
  DispatcherImpl& operator=(const DispatcherImpl&) = delete;

  // Recovers the state journaled in work_dir (if set), then starts the
  // thread that removes workers whose heartbeats stopped. An error (a
  // damaged journal) names the file and byte offset.
  absl::Status Start();

  absl::Status GetVersion(const proto::GetVersionRequest& request, proto::GetVersionResponse* response);
  absl::Status GetOrRegisterDataset(const proto::GetOrRegisterDatasetRequest& request,
                                    proto::GetOrRegisterDatasetResponse* response);
  absl::Status GetDatasetInfo(const proto::GetDatasetInfoRequest& request,
                              proto::GetDatasetInfoResponse* response);
  absl::Status GetOrCreateJob(const proto::GetOrCreateJobRequest& request,
                              proto::GetOrCreateJobResponse* response);
  absl::Status GetOrCreateIteration(const proto::GetOrCreateIterationRequest& request,
                                    proto::GetOrCreateIterationResponse* response);
  absl::Status ClientHeartbeat(const proto::ClientHeartbeatRequest& request,
                               proto::ClientHeartbeatResponse* response);
  absl::Status ReleaseIterationClient(const proto::ReleaseIterationClientRequest& request,
                                      proto::ReleaseIterationClientResponse* response);
  absl::Status WorkerHeartbeat(const proto::WorkerHeartbeatRequest& request,
                               proto::WorkerHeartbeatResponse* response);
  absl::Status WorkerUpdates(const proto::WorkerUpdatesRequest& request,
                             proto::WorkerUpdatesResponse* response);
  absl::Status WorkerShutdown(const proto::WorkerShutdownRequest& request,
                              proto::WorkerShutdownResponse* response);
  absl::Status GetSplits(const proto::GetSplitsRequest& request, proto::GetSplitsResponse* response);
  absl::Status GetWorkers(const proto::GetWorkersRequest& request, proto::GetWorkersResponse* response);
  absl::Status GetStatus(const proto::GetStatusRequest& request, proto::StatusSnapshot* response);

 private:
  using Clock = std::chrono::steady_clock;

  // Applies an update to the state and journals it before the lock is
  // released; a journal that cannot be written stops the process.
  absl::Status Apply(const proto::Update& update) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Recover() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::unique_ptr<SplitProvider>> NewSplitProvider(const proto::DatasetDef& def) const;
  // Removes a worker and finds takers for its undelivered splits.
  void RemoveWorker(const std::string& address,
                    std::vector<std::pair<std::string, proto::TaskDef>>* new_tasks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes a task, on the least busy live worker, for every iteration whose
  // returned splits no task can take.
  void AssignReturnedSplits(std::vector<std::pair<std::string, proto::TaskDef>>* new_tasks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushTasks(const std::vector<std::pair<std::string, proto::TaskDef>>& new_tasks) const;
  // The built dataset of a registered id, built once and cached.
  absl::StatusOr<DatasetPtr> Built(const std::string& dataset_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task that joins a running iteration serves coordinated reads only
  // from the round after the horizon.
  absl::Status CreateTask(int64_t iteration_id, const std::string& worker_address,
                          bool joins_running_iteration = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillTaskDef(const DispatcherState::Task& task, proto::TaskDef* def) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillWorkerInfo(const DispatcherState::Worker& worker, proto::WorkerInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLostWorkers();
  void CollectAbandonedIterations(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DispatcherConfig config_;  // constant after construction
  const TaskPushFn push_task_;

  absl::Mutex mu_;
  DispatcherState state_ ABSL_GUARDED_BY(mu_);
  std::optional<Journal> journal_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, DatasetPtr> built_datasets_ ABSL_GUARDED_BY(mu_);
  // distributed_epoch iterations' split providers.
  std::map<int64_t, std::unique_ptr<SplitProvider>> split_providers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Clock::time_point> worker_heartbeats_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> worker_heartbeat_unix_ms_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Clock::time_point> client_heartbeats_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads: the furthest round a consumer of each iteration has
  // reported.
  std::map<int64_t, int64_t> iteration_rounds_ ABSL_GUARDED_BY(mu_);
  // Since when each uncollected iteration has had no client.
  std::map<int64_t, Clock::time_point> iteration_idle_since_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread monitor_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_DISPATCHER_IMPL_H_
