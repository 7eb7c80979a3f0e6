#include "worker/pipeline_load.h"

#include <catch2/catch.hpp>
#include <chrono>

namespace sluice::worker {
namespace {

using std::chrono::milliseconds;

TEST_CASE("pipeline_load: busy is the time since the pipeline began less its waits for room",
          "[worker][pipeline_load]") {
  const PipelineLoad::Clock::time_point t0 = PipelineLoad::Clock::now();
  PipelineLoad load;
  CHECK(load.At(t0).busy == 0);  // not begun
  load.Begin(t0);
  CHECK(load.At(t0 + milliseconds(1500)).busy == Approx(1.5));
  load.WaitBegins(t0 + milliseconds(2000));
  // A wait under way counts as idle at once.
  CHECK(load.At(t0 + milliseconds(2500)).busy == Approx(2.0));
  CHECK(load.At(t0 + milliseconds(2500)).idle == Approx(0.5));
  load.WaitEnds(t0 + milliseconds(3000));
  CHECK(load.At(t0 + milliseconds(4000)).busy == Approx(3.0));
  CHECK(load.At(t0 + milliseconds(4000)).idle == Approx(1.0));
  // Ended, it stays as it was.
  load.End(t0 + milliseconds(5000));
  CHECK(load.At(t0 + milliseconds(9000)).busy == Approx(4.0));
  CHECK(load.At(t0 + milliseconds(9000)).idle == Approx(1.0));
}

}  // namespace
}  // namespace sluice::worker
