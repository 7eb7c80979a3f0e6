// Bounds on a ClientHeartbeat's repeated fields that both sides know: a
// client sends at most this many per heartbeat (the rest go with the next),
// and the dispatcher refuses more before it takes its lock, so a forged
// heartbeat of millions of ids cannot make it hold gigabytes or stall every
// other RPC while it applies them.
#ifndef SLUICE_SERVICE_HEARTBEAT_BOUNDS_H_
#define SLUICE_SERVICE_HEARTBEAT_BOUNDS_H_

#include <cstdint>

namespace sluice {

// completed_tasks and completed_splits, each.
inline constexpr int kMaxCompletedPerHeartbeat = 1 << 16;
// unreachable_workers.
inline constexpr int kMaxUnreachablePerHeartbeat = 1 << 12;
// taken_positions (and ReleaseIterationClientRequest's): the numbers of
// every split's [begin, end) pairs together. A consumer's share of a split
// comes a response at a time, so a held split's positions need few.
inline constexpr int kMaxTakenPositionNumbers = 1 << 20;
// The taken positions one iteration keeps (DispatcherState::Iteration::
// taken_positions) at most: a report past them fails the iteration.
inline constexpr int64_t kMaxIterationTakenNumbers = int64_t{1} << 21;

}  // namespace sluice

#endif  // SLUICE_SERVICE_HEARTBEAT_BOUNDS_H_
