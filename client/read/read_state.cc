#include "client/read/read_state.h"

namespace sluice::reader {

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
    if (StillReading(task)) return false;
  }
  return true;
}

bool ReadState::MayHoldNextSplit(const TaskState& task) const {
  if (task.ended || task.removed) return false;
  if (task.latest_seq <= order.next_seq()) return true;
  // No live task is at or before the next split: a lost worker's split was
  // leased again to one that is past it, and comes after what that worker
  // holds, so every task is read. That is bounded: the dispatcher hands out
  // returned splits before new ones, so a worker runs at most its leases
  // (kDeterministicLeaseElements each) and its buffer ahead of it.
  for (const auto& [id, other] : tasks) {
    if (!other.ended && !other.removed && other.latest_seq <= order.next_seq()) return false;
  }
  return true;
}

int64_t ReadState::PositionOf(TaskState& task, int64_t index, bool any_order) {
  if (!task.skipped.has_value()) {
    auto restored = restored_positions.find(task.worker_address);
    task.skipped.emplace(restored == restored_positions.end() ? IntRanges() : restored->second);
  }
  return any_order ? task.skipped->PositionAt(index) : task.skipped->PositionOf(index);
}

SplitDeliveries ReadState::DeliveredWithEnds() const {
  SplitDeliveries out = delivered;
  if (!track_worker_positions) return out;
  std::map<int64_t, int64_t> buffered;  // by task
  for (const auto& [task_id, position] : buffer_tags) ++buffered[task_id];
  for (const auto& [id, task] : tasks) {
    // A worker that gave nothing yet is listed too: a restore expects the
    // whole of its epoch from it.
    out.AddWorker(task.worker_address);
    // Every element of the task's epoch went out: a restore asks nothing
    // more of its worker.
    if (task.end_position >= 0 && !buffered.contains(id) && task.order.idle()) {
      out.SetWorkerEnd(task.worker_address, task.end_position);
    }
  }
  return out;
}

void ReadState::ReleaseOrdered(bool all) {
  std::deque<SplitOrder::Tagged> ready;
  if (all) {
    order.ReleaseAll(&ready);
  } else {
    order.Release(&ready);
  }
  for (SplitOrder::Tagged& tagged : ready) {
    buffer.push_back(std::move(tagged.element));
    if (track_deliveries) buffer_tags.emplace_back(tagged.seq, tagged.position);
  }
}

TransitLosses ReadState::TransitLossesOfEndedTasks() const {
  TransitLosses losses;
  for (const auto& [id, task] : tasks) {
    if (task.gaps.ended()) losses.TaskEnded(id, task.worker_address, task.gaps);
  }
  return losses;
}

}  // namespace sluice::reader
