// ClientActivity: what the dispatcher knows of each iteration client beyond
// the journaled state: when it was last heard, whether it was told its
// iteration's tasks (only such a client can have read elements: a read
// needs a task's read secret), its consumer index in a coordinated read,
// and, for a client released for silence (client_timeout_ms), what taking
// it back needs. Not journaled: after a restart the dispatcher hears every
// client of a live iteration afresh and counts it as told its tasks, so
// that a consumer lost across the restart still fails its peers' end.
// DispatcherCore keeps one under its lock.
#ifndef SLUICE_DISPATCHER_CLIENT_ACTIVITY_H_
#define SLUICE_DISPATCHER_CLIENT_ACTIVITY_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace sluice::dispatcher {

class ClientActivity {
 public:
  using Clock = std::chrono::steady_clock;

  // A client released for silence, kept so that it is taken back if it
  // returns while its iteration lives (a trainer that was only paused).
  struct Released {
    int64_t iteration_id = 0;
    int64_t consumer_index = -1;
    bool took_tasks = false;
    // The last hold (DispatcherState::Iteration::hold) of its iteration it
    // had answered, or that began before it joined: a shared exactly_once
    // read that held splits since reran them without this client's report,
    // so it may not come back.
    int64_t hold = 0;
  };

  // At most this many released clients are kept; the oldest go first (a
  // returning one then hears "unknown iteration client").
  explicit ClientActivity(size_t max_released) : max_released_(max_released) {}

  void NoteHeard(int64_t client, Clock::time_point now);
  void NoteConsumerIndex(int64_t client, int64_t consumer_index);
  void NoteToldTasks(int64_t client);
  // Told its iteration's end: it has nothing more to take.
  void NoteToldEnd(int64_t client);

  bool WasToldTasks(int64_t client) const { return told_tasks_.contains(client); }
  std::optional<Clock::time_point> LastHeard(int64_t client) const;
  // The clients not heard for longer than `timeout` at `now`.
  std::vector<int64_t> Silent(Clock::time_point now, Clock::duration timeout) const;

  // `client` is no longer heard or told its tasks; with an iteration, it
  // is kept as released from it.
  void Release(int64_t client, std::optional<int64_t> iteration_id, int64_t hold = 0);
  const std::map<int64_t, Released>& released() const { return released_; }
  const Released* FindReleased(int64_t client) const;
  // A released client is back: told its tasks again if it was before.
  void TakeBack(int64_t client);
  // Released clients of a collected iteration can no longer come back.
  void ForgetReleasedOf(int64_t iteration_id);

  // The client released itself (ReleaseIterationClient): everything goes.
  void Forget(int64_t client);

 private:
  const size_t max_released_;
  std::map<int64_t, Clock::time_point> last_heard_;
  absl::flat_hash_set<int64_t> told_tasks_;
  std::map<int64_t, int64_t> consumer_index_;
  std::map<int64_t, Released> released_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_CLIENT_ACTIVITY_H_
