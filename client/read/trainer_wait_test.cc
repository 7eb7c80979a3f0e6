#include "client/read/trainer_wait.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <optional>

#include "client/read/read_state.h"

namespace sluice::reader {
namespace {

TEST_CASE("trainer_wait: a read reports the smaller of its own wait and the trainer's since it began",
          "[client][trainer_wait]") {
  // Other tests of this process may have measured the trainer already.
  const bool measured_before = TrainerWaitSeconds().has_value();
  if (measured_before) AddTrainerWait(3);  // before the read: not its own
  ReadState state(/*max_outstanding_in=*/4, /*sole_reader_in=*/true, std::nullopt);
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&state.mu);
  state.waited_seconds = 5;
  // A wait under way counts at once.
  state.waiting_since = now - std::chrono::seconds(1);
  if (!measured_before) CHECK(state.ReportedWait(now) == Approx(6.0));
  // A layer above reads ahead (the Python iterator): its trainer waited
  // 2 s, while this read's GetNext, called by the reading thread, waited 6.
  AddTrainerWait(2);
  AddTrainerWait(-1);  // ignored
  CHECK(state.ReportedWait(now) == Approx(2.0));
  // A trainer that waits more than the read (another read is the slow one)
  // is held to the read's own wait.
  AddTrainerWait(10);
  CHECK(state.ReportedWait(now) == Approx(6.0));
}

}  // namespace
}  // namespace sluice::reader
