// Which silent workers the dispatcher gives up. A worker silent past
// worker_timeout_ms is lost, unless most workers went silent together: a
// dispatcher that hears from almost nobody is more likely cut off itself
// (its host's network, a restart behind a load balancer) than to have lost
// most of its cluster at once, and its workers may still be serving their
// readers. Then only workers silent past silent_majority_timeout_ms are
// removed; a worker that is really gone is still found at once by its
// readers' reports (Liveness::NoteUnreachable).
#ifndef SLUICE_DISPATCHER_SILENT_WORKERS_H_
#define SLUICE_DISPATCHER_SILENT_WORKERS_H_

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sluice::dispatcher {

using WorkerHeardTimes = std::map<std::string, std::chrono::steady_clock::time_point>;

struct SilentWorkers {
  // Silent past half of worker_timeout_ms: workers cut off together cross
  // the timeout up to a heartbeat interval apart, so the first to cross
  // it is judged with the others already this silent.
  size_t silent = 0;
  size_t known = 0;
  // Those silent workers, with when they were last heard.
  WorkerHeardTimes silent_workers;
  // More than half of the known workers are silent, one of them past
  // worker_timeout_ms.
  bool majority_silent = false;
  // The addresses to remove now, sorted, each with the timeout it passed.
  std::vector<std::pair<std::string, std::chrono::milliseconds>> to_remove;
};

// `excused`: workers that were silent when the last silent majority ended
// (the dispatcher heard most of them again), with when it ended. For
// silent_majority_timeout_ms from then they keep that timeout, heard or
// not: the silence that began while the dispatcher was cut off is more
// likely its than theirs, a connection attempt made during the cut may
// take seconds of SYN retries to succeed after it, and a connection that
// lived through it may wait out TCP's backed-off retransmission timer
// (seconds after a cut of seconds) even after one heartbeat got through.
SilentWorkers FindSilentWorkers(const WorkerHeardTimes& last_heard, std::chrono::steady_clock::time_point now,
                                std::chrono::milliseconds worker_timeout,
                                std::chrono::milliseconds silent_majority_timeout,
                                const WorkerHeardTimes& excused = {});

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_SILENT_WORKERS_H_
