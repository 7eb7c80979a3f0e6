#include "client/read/epoch_losses.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "client/read/warnings.h"

namespace sluice::reader {
namespace {

TEST_CASE("epoch_losses: a lost task whose requests in flight still brought its end lost nothing",
          "[client][epoch_losses]") {
  // The dispatcher unlisted both tasks (it lost the workers, the reader
  // had not) after 4 and 527 of 1000 elements; the requests already out
  // brought the rest of one of them (issue 36).
  EpochLosses losses(1000, /*shared_job=*/false, /*allow_partial=*/false);
  losses.TaskLost(1, "10.0.0.2:6000", "removed by the dispatcher", 4);
  losses.TaskLost(2, "10.0.0.3:6000", "removed by the dispatcher", 527);
  losses.Settle(1, /*read_whole=*/true, 1000);
  losses.Settle(2, /*read_whole=*/false, 600);
  const absl::Status status = losses.Finish(2);
  CHECK(status.code() == absl::StatusCode::kDataLoss);
  CHECK(losses.Describe(2) ==
        "parallel_epochs: the epoch of 1 of 2 workers ended early: worker 10.0.0.3:6000 (task 2, removed by "
        "the dispatcher) after 600 of 1000 elements; 400 elements lost");
  losses.Settle(2, /*read_whole=*/true, 1000);
  CHECK(losses.empty());
  CHECK(losses.Finish(2).ok());
}

TEST_CASE("epoch_losses: an end without every element is still a loss", "[client][epoch_losses]") {
  EpochLosses losses(1000, /*shared_job=*/false, /*allow_partial=*/false);
  losses.TaskLost(1, "10.0.0.2:6000", "lost", 10);
  // The end arrived, but a request before it failed and was never asked
  // again: 990 elements, not 1000.
  losses.Settle(1, /*read_whole=*/true, 990);
  CHECK(losses.Describe(1) ==
        "parallel_epochs: the epoch of 1 of 1 worker ended early: worker 10.0.0.2:6000 (task 1, lost) after "
        "990 of 1000 elements; 10 elements lost");
  // A task that was never lost is not made one by settling it.
  losses.Settle(7, /*read_whole=*/false, 3);
  CHECK(losses.Describe(1).find("task 7") == std::string::npos);
  // Unknown cardinality: the worker's end alone says the task was whole.
  EpochLosses unknown(-1, /*shared_job=*/false, /*allow_partial=*/false);
  unknown.TaskLost(1, "10.0.0.2:6000", "lost", 10);
  unknown.Settle(1, /*read_whole=*/true, 20);
  CHECK(unknown.empty());
}

TEST_CASE("epoch_losses: a drained worker's short epoch read to its end is no loss, and is told",
          "[client][epoch_losses][drain]") {
  EpochLosses losses(1000, /*shared_job=*/false, /*allow_partial=*/false);
  losses.TaskDrained(1, "10.0.0.2:6000");
  losses.TaskDrained(2, "10.0.0.3:6000");
  losses.TaskDrained(3, "10.0.0.4:6000");
  // Task 1 drained after 300 elements and the reader read its end; the
  // dispatcher unlisted it first (its worker left). Task 2's worker
  // timed out its drain before the reader had the end: a loss. Task 3's
  // epoch was whole before the drain: nothing to say.
  losses.TaskLost(1, "10.0.0.2:6000", "removed by the dispatcher", 250);
  losses.TaskLost(2, "10.0.0.3:6000", "worker shut down", 40);
  losses.Settle(1, /*read_whole=*/true, 300);
  losses.Settle(2, /*read_whole=*/false, 40);
  losses.Settle(3, /*read_whole=*/true, 1000);
  CHECK(losses.DescribeDrained() ==
        "parallel_epochs: drained workers (scaled down) ended their epochs early, cleanly: worker "
        "10.0.0.2:6000 (task 1) after 300 of 1000 elements");
  CHECK(losses.Describe(3) ==
        "parallel_epochs: the epoch of 1 of 3 workers ended early: worker 10.0.0.3:6000 (task 2, worker shut "
        "down) after 40 of 1000 elements; 960 elements lost");
  std::vector<std::string> warned;
  const WarningSink previous = SetWarningSink([&](const std::string& message) { warned.push_back(message); });
  CHECK(losses.Finish(3).code() == absl::StatusCode::kDataLoss);
  SetWarningSink(previous);
  CHECK(warned == std::vector<std::string>{losses.DescribeDrained()});
}

}  // namespace
}  // namespace sluice::reader
