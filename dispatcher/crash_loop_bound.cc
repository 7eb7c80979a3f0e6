#include "dispatcher/crash_loop_bound.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::dispatcher {

void CrashLoopBound::TaskStarted(int64_t task_id, Clock::time_point now) { task_started_[task_id] = now; }

void CrashLoopBound::TaskFinished(int64_t task_id, int64_t iteration_id) {
  task_started_.erase(task_id);
  losses_.erase(iteration_id);
}

void CrashLoopBound::ForgetTask(int64_t task_id) { task_started_.erase(task_id); }

void CrashLoopBound::ForgetIteration(int64_t iteration_id) { losses_.erase(iteration_id); }

CrashLoopBound::Clock::duration CrashLoopBound::TaskEnded(int64_t task_id, Clock::time_point now) {
  auto started = task_started_.find(task_id);
  if (started == task_started_.end()) return Clock::duration::max();
  const Clock::duration lived = now - started->second;
  task_started_.erase(started);
  return lived;
}

std::optional<std::string> CrashLoopBound::CountLoss(const DispatcherState::Task& task,
                                                     const std::string& reason, bool may_be_crash,
                                                     Clock::duration lived) {
  // A task that ran a while shows the pipeline can run.
  if (!may_be_crash || lived >= kCrashLoopTaskLifetime) {
    losses_.erase(task.iteration_id);
    return std::nullopt;
  }
  std::vector<std::string>& losses = losses_[task.iteration_id];
  losses.push_back(absl::StrCat("task ", task.id, " on ", task.worker_address, " (", reason, ") after ",
                                std::chrono::duration_cast<std::chrono::milliseconds>(lived).count(), " ms"));
  if (static_cast<int>(losses.size()) < kCrashLoopLosses) return std::nullopt;
  std::string cause = absl::StrCat(
      "iteration ", task.iteration_id, " lost its tasks ", losses.size(), " times in a row, each within ",
      std::chrono::duration_cast<std::chrono::milliseconds>(kCrashLoopTaskLifetime).count(),
      " ms of starting, so its pipeline most likely crashes the workers (see their logs): ",
      absl::StrJoin(losses, "; "));
  losses_.erase(task.iteration_id);
  return cause;
}

}  // namespace sluice::dispatcher
