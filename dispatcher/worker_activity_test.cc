#include "dispatcher/worker_activity.h"

#include <catch2/catch.hpp>

namespace sluice::dispatcher {

TEST_CASE("WorkerActivity: last heard, last heartbeat and send rates per worker",
          "[dispatcher][worker_activity]") {
  WorkerActivity activity;
  const WorkerActivity::Clock::time_point t0 = WorkerActivity::Clock::now();
  // Heard at a restart of the dispatcher: timed from now, no heartbeat yet.
  activity.NoteHeard("w:1", t0);
  CHECK(activity.LastHeard("w:1") == t0);
  CHECK_FALSE(activity.LastHeartbeatUnixMs("w:1").has_value());
  CHECK(activity.RateOf("w:1").elements_per_second == 0);

  activity.NoteHeartbeat("w:1", t0 + std::chrono::seconds(1), 1000, 0, 0);
  CHECK(activity.LastHeartbeatUnixMs("w:1") == 1000);
  CHECK(activity.RateOf("w:1").elements_per_second == 0);  // one report: no rate yet
  activity.NoteHeartbeat("w:1", t0 + std::chrono::seconds(2), 2000, 100, 1000);
  CHECK(activity.RateOf("w:1").elements_per_second == 100);
  CHECK(activity.RateOf("w:1").bytes_per_second == 1000);
  // A restarted worker counts from zero: the rate stays until it has two
  // reports of its own.
  activity.NoteHeartbeat("w:1", t0 + std::chrono::seconds(3), 3000, 10, 10);
  CHECK(activity.RateOf("w:1").elements_per_second == 100);
  activity.NoteHeartbeat("w:1", t0 + std::chrono::seconds(4), 4000, 60, 510);
  CHECK(activity.RateOf("w:1").elements_per_second == 50);
  CHECK(activity.RateOf("w:1").bytes_per_second == 500);
  CHECK(activity.LastHeard("w:1") == t0 + std::chrono::seconds(4));
  CHECK(activity.last_heard().size() == 1);

  activity.Forget("w:1");
  CHECK_FALSE(activity.LastHeard("w:1").has_value());
  CHECK_FALSE(activity.LastHeartbeatUnixMs("w:1").has_value());
  CHECK(activity.last_heard().empty());
  CHECK(activity.RateOf("unknown:1").bytes_per_second == 0);
}

}  // namespace sluice::dispatcher
