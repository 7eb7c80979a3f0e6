#include "dispatcher/silent_workers.h"

#include <algorithm>

namespace sluice::dispatcher {

SilentWorkers FindSilentWorkers(const WorkerHeardTimes& last_heard, std::chrono::steady_clock::time_point now,
                                std::chrono::milliseconds worker_timeout,
                                std::chrono::milliseconds silent_majority_timeout,
                                const WorkerHeardTimes& excused) {
  SilentWorkers result;
  result.known = last_heard.size();
  bool any_timed_out = false;
  for (const auto& [address, last] : last_heard) {
    if (now - last > worker_timeout / 2) result.silent_workers.emplace(address, last);
    if (now - last > worker_timeout) any_timed_out = true;
  }
  result.silent = result.silent_workers.size();
  result.majority_silent = any_timed_out && result.silent * 2 > result.known;
  const std::chrono::milliseconds longer = std::max(worker_timeout, silent_majority_timeout);
  for (const auto& [address, last] : last_heard) {  // a map: sorted by address
    const auto excuse = excused.find(address);
    const bool is_excused = excuse != excused.end() && now - excuse->second < longer;
    const std::chrono::milliseconds timeout = result.majority_silent || is_excused ? longer : worker_timeout;
    if (now - last > timeout) result.to_remove.emplace_back(address, timeout);
  }
  return result;
}

}  // namespace sluice::dispatcher
