// DispatcherState's lost and dropped leases: a lost task's splits go back
// to its iteration, or, for a shared exactly_once read, wait for its
// clients' reports of the positions they took (issue 50, finding 10;
// docs/design.md, "Shared exactly_once reads after a lost worker"); a
// collected or failed iteration drops them.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dispatcher/dispatcher_state.h"

namespace sluice::dispatcher {

void DispatcherState::DropSplits(Iteration& iteration) {
  iteration.returned_splits.clear();
  iteration.split_cursor.clear();
  for (int64_t id : iteration.tasks) {
    Task& task = tasks_.at(id);
    task.leases.clear();
    task.last_split_response.clear();
    task.last_end_of_splits = true;
  }
  iteration.lease_holders.clear();
  // Nothing is handed out again, so a restore's skip lists are dead
  // weight: a superseded restore's client may heartbeat on for long.
  iteration.skip_splits = IntRanges();
  iteration.skip_positions.clear();
  iteration.held_splits.clear();
  iteration.awaiting_reports.clear();
  iteration.taken_positions.clear();
}

void DispatcherState::ReturnLeases(Task& task) {
  Iteration& iteration = iterations_[task.iteration_id];
  if (!iteration.collected && iteration.error_code == 0) HoldOrReturn(iteration, task.leases);
  ClearLeases(task);
}

bool DispatcherState::HoldsLostSplits(const Iteration& iteration) const {
  const proto::JobParams& params = jobs_.at(iteration.job_id).params;
  // A deterministic or anonymous read's clients are sole readers, whose
  // filter drops exactly their own repeats of a whole rerun.
  return params.processing_mode() == proto::DISTRIBUTED_EPOCH && params.exactly_once() &&
         params.num_consumers() == 0 && !params.job_name().empty() && !params.deterministic();
}

int64_t DispatcherState::LowestOutstandingSplit(const Iteration& iteration) const {
  int64_t lowest = iteration.next_split_seq;
  for (const SplitRuns* runs : {&iteration.returned_splits, &iteration.held_splits}) {
    if (!runs->empty()) lowest = std::min(lowest, runs->begin()->first);
  }
  if (!iteration.lease_holders.empty()) lowest = std::min(lowest, iteration.lease_holders.begin()->first);
  return lowest;
}

void DispatcherState::HoldOrReturn(Iteration& iteration, const SplitRuns& leases) {
  if (leases.empty()) return;
  const bool hold = HoldsLostSplits(iteration);
  for (const auto& [seq, split] : leases)
    (hold ? iteration.held_splits : iteration.returned_splits)[seq] = split;
  if (!hold) return;
  // Every client answers the new hold, which covers the earlier one's
  // splits too; with none, they go back at once.
  ++iteration.hold;
  iteration.awaiting_reports = iteration.clients;
  ReturnHeldIfAnswered(iteration);
}

void DispatcherState::ForgetTakenPositions(Iteration& iteration, const SplitRuns& runs) {
  for (const auto& [seq, run] : runs) {
    auto& taken = iteration.taken_positions;
    taken.erase(taken.lower_bound(seq), taken.lower_bound(seq + std::max<int64_t>(run.count, 1)));
  }
}

void DispatcherState::ReturnHeldIfAnswered(Iteration& iteration) {
  if (!iteration.awaiting_reports.empty() || iteration.held_splits.empty()) return;
  for (const auto& [seq, split] : iteration.held_splits) iteration.returned_splits[seq] = split;
  iteration.held_splits.clear();
}

absl::Status DispatcherState::ApplyTakenPositions(const proto::Update::ReportTakenPositions& u) {
  auto found = iterations_.find(u.iteration_id());
  if (found == iterations_.end() || !found->second.clients.contains(u.iteration_client_id())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot take a report of client ", u.iteration_client_id(), " for iteration ", u.iteration_id()));
  }
  Iteration& iteration = found->second;
  // Checked whole before anything changes.
  std::vector<std::pair<int64_t, IntRanges>> reported;
  for (const proto::SplitDelivery& split : u.positions()) {
    absl::StatusOr<IntRanges> ranges = RangesFromPairs(split.delivered(), 0, "taken positions");
    if (!ranges.ok()) return absl::FailedPreconditionError(ranges.status().message());
    // Only splits still out matter: the others are delivered, or never
    // handed out.
    if (IsSplitOutstanding(iteration, split.seq())) reported.emplace_back(split.seq(), *std::move(ranges));
  }
  for (const auto& [seq, ranges] : reported) {
    IntRanges& taken = iteration.taken_positions[seq];
    for (const auto& [begin, end] : ranges) InsertRange(&taken, begin, end);
  }
  if (u.hold() != 0 && u.hold() == iteration.hold) {
    iteration.awaiting_reports.erase(u.iteration_client_id());
    ReturnHeldIfAnswered(iteration);
  }
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
