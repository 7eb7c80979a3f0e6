#include "client/read_state.h"

namespace sluice {

bool IsTransientReadError(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) || absl::IsCancelled(status) ||
         absl::IsAborted(status);
}

void TaskState::NoteReachability(const absl::Status& status) {
  if (!absl::IsUnavailable(status)) {
    unreachable_since.reset();
    return;
  }
  unreachable_error = std::string(status.message());
  if (!unreachable_since.has_value()) unreachable_since = absl::Now();
}

bool ReadState::CanReturn() const { return !buffer.empty() || !status.ok() || Finished(); }

bool ReadState::Finished() const {
  // With several requests in flight per task, one may see the end while
  // another still carries the last elements: wait for every response.
  if (!iteration_finished || outstanding > 0 || held_elements > 0) return false;
  for (const auto& [id, task] : tasks) {
    if (!task.ended && !task.removed) return false;
  }
  return true;
}

TransitLosses ReadState::TransitLossesOfEndedTasks() const {
  TransitLosses losses;
  for (const auto& [id, task] : tasks) {
    if (task.gaps.ended()) losses.TaskEnded(id, task.worker_address, task.gaps);
  }
  return losses;
}

}  // namespace sluice
