// CrashLoopBound: notices an iteration whose pipeline most likely crashes
// the workers that run it, so that the dispatcher fails the iteration
// instead of handing it on to crash every worker in turn.
//
// It remembers when each unfinished task started, and per iteration the
// run of losses of short-lived tasks: a task lost within
// kCrashLoopTaskLifetime of starting, in a way a crash can explain (a
// restart, silence), extends the run; any other loss, or a task that ran to
// its end, ends it. At kCrashLoopLosses in a row the iteration should fail,
// with the losses as its cause. Nothing here is journaled: after a restart
// every unfinished task counts as started then.
//
// Not thread-safe: the dispatcher calls it under DispatcherCore's mutex.
//
//   bound.TaskStarted(task.id, Clock::now());
//   ...its worker restarted:
//   const auto lived = bound.TaskEnded(task.id, Clock::now());
//   if (auto cause = bound.CountLoss(task, "worker restarted", true, lived)) Fail(*cause);
#ifndef SLUICE_DISPATCHER_CRASH_LOOP_BOUND_H_
#define SLUICE_DISPATCHER_CRASH_LOOP_BOUND_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dispatcher/dispatcher_state.h"

namespace sluice::dispatcher {

// An iteration whose tasks are lost this many times in a row, each within
// kCrashLoopTaskLifetime of starting (its worker restarted or went
// silent), fails with the losses as its cause: its pipeline most likely
// crashes the workers, and handing it on would crash them all in turn.
inline constexpr int kCrashLoopLosses = 4;
inline constexpr auto kCrashLoopTaskLifetime = std::chrono::seconds(10);

class CrashLoopBound {
 public:
  using Clock = std::chrono::steady_clock;

  // A task starts: made now, or found unfinished at recovery.
  void TaskStarted(int64_t task_id, Clock::time_point now);
  // A task ran to its end: its iteration's pipeline can run, so the run of
  // losses ends.
  void TaskFinished(int64_t task_id, int64_t iteration_id);
  // Forgets a task that ends without a loss to count (its iteration is
  // over or removed).
  void ForgetTask(int64_t task_id);
  // Forgets an iteration's run of losses (it is over or removed).
  void ForgetIteration(int64_t iteration_id);

  // A task is lost: how long it lived, or Clock::duration::max() if it was
  // not seen to start. The task is forgotten.
  Clock::duration TaskEnded(int64_t task_id, Clock::time_point now);
  // Counts the loss of `task`, which lived `lived`, for `reason`.
  // `may_be_crash` is false for a loss no crash explains (a shutdown, a
  // worker that lives but clients cannot reach). Returns the cause to fail
  // the iteration with once the run reaches kCrashLoopLosses; the run then
  // starts afresh.
  std::optional<std::string> CountLoss(const DispatcherState::Task& task, const std::string& reason,
                                       bool may_be_crash, Clock::duration lived);

 private:
  std::map<int64_t, Clock::time_point> task_started_;
  // Each iteration's current run of losses, described.
  std::map<int64_t, std::vector<std::string>> losses_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_CRASH_LOOP_BOUND_H_
