// SharedExactlyOnce: where an exactly_once read shared by several consumers
// cannot keep its promise, so that the dispatcher says so instead of
// repeating or skipping elements.
//
// Consumers of a shared job take a task's elements first come, first
// served, and each drops only the repeats of what it delivered itself. When
// a task is lost before its elements were all read, its leased splits run
// again elsewhere; no consumer knows what the others delivered of them, so
// the rerun would give one consumer what another already had (a repeat) or
// be dropped by a consumer already past a position that was in flight to
// another (a loss). So:
//
//   - a task lost (its worker removed, or LoseTask) while its iteration of
//     an exactly_once job has had more than one client fails the iteration
//     (Aborted), journaled before the loss so that no rerun split is ever
//     handed out, even across a dispatcher restart;
//   - with one client so far, that client reads the rerun alone (its filter
//     drops exactly its own repeats), and a second client may not join it
//     afterwards.
//
// A named job read without `deterministic` holds a lost task's splits
// instead, until each consumer has said which of their positions it took,
// and recovers exactly (DispatcherState::HoldsLostSplits); what is left
// here is a deterministic read shared by several consumers. Coordinated
// reads (num_consumers) deal rounds by consumer and are not affected.
//
//   if (auto why = SharedExactlyOnceBreak(state, task, reason)) FailIteration(..., kAborted, *why);
#ifndef SLUICE_DISPATCHER_SHARED_EXACTLY_ONCE_H_
#define SLUICE_DISPATCHER_SHARED_EXACTLY_ONCE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "dispatcher/dispatcher_state.h"

namespace sluice::dispatcher {

// The message to fail `task`'s iteration with if losing the task (its
// worker at `task.worker_address`, for `reason`) would break the exactly
// once promise of a read shared by several clients; nullopt otherwise (the
// task was read to its end, or is already lost, or the read is not such a
// read, or it failed or was collected already).
std::optional<std::string> SharedExactlyOnceBreak(const DispatcherState& state,
                                                  const DispatcherState::Task& task,
                                                  const std::string& reason);

// FailedPrecondition when a new client must not join `iteration`: an
// exactly_once read, not finished, one of whose tasks was lost while it had
// one client, who is reading the lost task's splits again alone.
absl::Status CheckJoinAfterLoss(const DispatcherState& state, const DispatcherState::Iteration& iteration);

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_SHARED_EXACTLY_ONCE_H_
