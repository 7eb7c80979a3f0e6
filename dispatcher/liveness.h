// Liveness: the monitor thread and what follows from a loss. It removes
// workers whose heartbeats stopped (or that clients cannot reach), loses
// their tasks and hands their undelivered splits to other tasks, fails an
// iteration that crash-loops, releases silent clients (and takes them back
// if they return), and collects what is over: iterations without clients,
// finished jobs and unused datasets.
#ifndef SLUICE_DISPATCHER_LIVENESS_H_
#define SLUICE_DISPATCHER_LIVENESS_H_

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/silent_workers.h"

namespace sluice::dispatcher {

class Liveness {
 public:
  using Clock = DispatcherCore::Clock;
  using NewTasks = DispatcherCore::NewTasks;

  explicit Liveness(DispatcherCore& core);
  // Stops and joins the monitor thread.
  ~Liveness();
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // Starts the monitor thread, once the core has recovered its state.
  void StartMonitor();

  // Removes a worker, its unfinished tasks lost for `reason`, and finds
  // takers for its undelivered splits.
  void RemoveWorker(const std::string& address, const std::string& reason, NewTasks* new_tasks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Marks a registered worker draining (journaled once; again is a no-op):
  // it gets no new tasks, its tasks no new splits, and the iterations
  // whose splits only its tasks were taking get a task elsewhere.
  absl::Status DrainWorker(const std::string& address, NewTasks* new_tasks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
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
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Fails an iteration (journaled) for `message`; its readers get it.
  void FailIteration(int64_t iteration_id, absl::StatusCode code, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Makes a task, on the least busy live worker, for every iteration whose
  // returned splits no task can take.
  void AssignReturnedSplits(NewTasks* new_tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Takes back a client released for silence, or says what happened.
  absl::StatusOr<int64_t> ResumeReleasedClient(int64_t iteration_client_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);

 private:
  // Before `tasks` are lost for `reason`: fails each iteration whose exactly
  // once read is shared by several clients (shared_exactly_once.h), so that
  // the failure is journaled before the loss and no split runs again.
  void FailBrokenSharedReads(const std::vector<int64_t>& tasks, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // The hold of each of `tasks`' iterations, and after they were lost, a
  // line for each iteration that now holds splits for its clients' reports.
  std::map<int64_t, int64_t> HoldsOf(const std::vector<int64_t>& tasks) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  void LogNewHolds(const std::map<int64_t, int64_t>& holds_before) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // The monitor thread: removes workers whose heartbeats stopped, releases
  // silent clients and collects what is over, until stopping_.
  void RunMonitor();
  // Counts the loss of `task` (just lost, for `reason`) towards its
  // iteration's crash loop, and fails the iteration at kCrashLoopLosses.
  void NoteLostTask(const DispatcherState::Task& task, const std::string& reason, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Drops what this process keeps about an iteration that reads no more
  // (collected, failed or removed): its split provider and timers.
  void ForgetIteration(int64_t iteration_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Logs when most workers go silent at once, and when they are heard
  // again; true when they just were (excused_workers_ then holds the rest).
  bool NoteSilentMajority(const SilentWorkers& silent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Clients silent for client_timeout_ms are released (and remembered);
  // true when any was.
  bool ReleaseSilentClients(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  void CollectAbandonedIterations(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Jobs whose iterations are all over and without clients, and datasets
  // that no job uses, after job_retention_ms: removed from the state (and
  // so from the journal at its next snapshot).
  void CollectFinishedJobs(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);

  DispatcherCore& core_;
  // Workers that an iteration's clients report unreachable, by (iteration
  // id, worker address): the first and the latest report of the current
  // run of reports.
  std::map<std::pair<int64_t, std::string>, std::pair<Clock::time_point, Clock::time_point>>
      unreachable_reports_ ABSL_GUARDED_BY(core_.mu_);
  // Since when each job has been over, and each dataset unused.
  std::map<int64_t, Clock::time_point> job_idle_since_ ABSL_GUARDED_BY(core_.mu_);
  std::map<std::string, Clock::time_point> dataset_idle_since_ ABSL_GUARDED_BY(core_.mu_);
  // Since when each uncollected iteration has had no client.
  std::map<int64_t, Clock::time_point> iteration_idle_since_ ABSL_GUARDED_BY(core_.mu_);
  bool stopping_ ABSL_GUARDED_BY(core_.mu_) = false;
  // Most workers are silent at once (logged when it starts and ends).
  bool suspecting_isolation_ ABSL_GUARDED_BY(core_.mu_) = false;
  // Workers still silent when the last such silence ended, with when it
  // ended (FindSilentWorkers' `excused`).
  WorkerHeardTimes excused_workers_ ABSL_GUARDED_BY(core_.mu_);
  std::thread monitor_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_LIVENESS_H_
