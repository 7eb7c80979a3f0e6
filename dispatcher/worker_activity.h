// WorkerActivity: what the dispatcher hears from each worker beyond the
// journaled state: when it last heartbeat (on the steady clock, for
// liveness, and as wall time, for the status pages), and how fast it sends
// (from the running totals its heartbeats report). Not journaled: after a
// restart every known worker starts with a fresh timeout
// (HeardAllAt) and its rates come back with its next heartbeats.
// DispatcherCore keeps one under its lock.
#ifndef SLUICE_DISPATCHER_WORKER_ACTIVITY_H_
#define SLUICE_DISPATCHER_WORKER_ACTIVITY_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace sluice::dispatcher {

class WorkerActivity {
 public:
  using Clock = std::chrono::steady_clock;

  struct Rate {
    double elements_per_second = 0;
    double bytes_per_second = 0;
  };

  // A heartbeat at `now` (`unix_ms` on the wall clock) reporting
  // `elements_sent` and `bytes_sent` so far; the rates are the change since
  // the previous report (kept as they were when the totals went down: a
  // restarted worker counts from zero).
  void NoteHeartbeat(const std::string& address, Clock::time_point now, int64_t unix_ms,
                     int64_t elements_sent, int64_t bytes_sent);
  // Counts `address` as heard at `now`, without a heartbeat's figures.
  void NoteHeard(const std::string& address, Clock::time_point now);
  void Forget(const std::string& address);

  // When each worker was last heard, on the steady clock.
  const std::map<std::string, Clock::time_point>& last_heard() const { return last_heard_; }
  std::optional<Clock::time_point> LastHeard(const std::string& address) const;
  // The wall time of its last heartbeat, if it sent one since this
  // dispatcher started.
  std::optional<int64_t> LastHeartbeatUnixMs(const std::string& address) const;
  // Zero for a worker with fewer than two heartbeats.
  Rate RateOf(const std::string& address) const;

 private:
  struct Sent {
    int64_t unix_ms = 0;
    int64_t elements = 0;
    int64_t bytes = 0;
    Rate rate;
  };
  std::map<std::string, Clock::time_point> last_heard_;
  std::map<std::string, Sent> sent_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_WORKER_ACTIVITY_H_
