#include "dispatcher/client_activity.h"

#include <catch2/catch.hpp>
#include <vector>

namespace sluice::dispatcher {

TEST_CASE("ClientActivity: silent clients are released with what taking them back needs",
          "[dispatcher][client_activity]") {
  using Clock = ClientActivity::Clock;
  ClientActivity clients(/*max_released=*/2);
  const Clock::time_point t0 = Clock::now();
  clients.NoteHeard(1, t0);
  clients.NoteHeard(2, t0 + std::chrono::seconds(5));
  clients.NoteHeard(3, t0);
  clients.NoteConsumerIndex(1, 4);
  clients.NoteToldTasks(1);
  clients.NoteToldTasks(3);
  clients.NoteToldEnd(3);  // told the end: nothing more to take
  CHECK(clients.WasToldTasks(1));
  CHECK_FALSE(clients.WasToldTasks(3));
  CHECK(clients.LastHeard(2) == t0 + std::chrono::seconds(5));
  CHECK(clients.Silent(t0 + std::chrono::seconds(6), std::chrono::seconds(3)) == std::vector<int64_t>{1, 3});

  clients.Release(1, /*iteration_id=*/7);
  clients.Release(3, std::nullopt);  // its iteration is gone: nothing to keep
  CHECK_FALSE(clients.LastHeard(1).has_value());
  CHECK_FALSE(clients.WasToldTasks(1));
  REQUIRE(clients.FindReleased(1) != nullptr);
  CHECK(clients.FindReleased(1)->iteration_id == 7);
  CHECK(clients.FindReleased(1)->consumer_index == 4);
  CHECK(clients.FindReleased(1)->took_tasks);
  CHECK(clients.FindReleased(3) == nullptr);
  CHECK(clients.released().size() == 1);

  // Taken back: told its tasks again, no longer released.
  clients.TakeBack(1);
  CHECK(clients.WasToldTasks(1));
  CHECK(clients.FindReleased(1) == nullptr);

  // Bounded: past max_released, the oldest (lowest id) goes first.
  clients.Release(10, 7);
  clients.Release(11, 8);
  clients.Release(12, 8);
  CHECK(clients.FindReleased(10) == nullptr);
  CHECK(clients.FindReleased(11)->consumer_index == -1);
  CHECK_FALSE(clients.FindReleased(11)->took_tasks);
  clients.ForgetReleasedOf(8);
  CHECK(clients.released().empty());

  clients.Forget(1);
  clients.Forget(2);
  CHECK_FALSE(clients.WasToldTasks(1));
  CHECK(clients.Silent(t0 + std::chrono::hours(1), std::chrono::seconds(1)).empty());
}

}  // namespace sluice::dispatcher
