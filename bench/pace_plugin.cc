// A benchmark plugin: `bench.pace` passes elements through unchanged, at
// most `per_second` of them a second in this process, scaled by the
// environment variable SLUICE_BENCH_PACE_SCALE (default 1). Workers started
// with different scales are workers of different speeds running one
// pipeline, as bench/deterministic_order.sh needs:
//
//   SLUICE_BENCH_PACE_SCALE=0.5 workerd --plugins libsluice_bench_pace.so ...
//   pipeline:
//     - range: 100000000
//     - map: {fn: bench.pace, per_second: 20000}
//
// The pace holds on average: each element's deadline follows the last
// one's, not the clock, so sleeps that overshoot are made up.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "pipeline/function.h"

namespace {

using Clock = std::chrono::steady_clock;

double ScaleFromEnvironment() {
  const char* value = std::getenv("SLUICE_BENCH_PACE_SCALE");
  if (value == nullptr) return 1.0;
  const double scale = std::atof(value);
  return scale > 0 ? scale : 1.0;
}

// One pace per process: the worker's, whatever its tasks and splits.
std::mutex pace_mu;
Clock::time_point next_deadline;

class Pace : public sluice::ElementFunction {
 public:
  explicit Pace(double per_second)
      : interval_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(1.0 / (per_second * ScaleFromEnvironment())))) {}

  absl::StatusOr<sluice::ElementSpec> OutputSpec(const sluice::ElementSpec& input) const override {
    return input;
  }

  absl::StatusOr<sluice::Element> Call(const sluice::Element& input) const override {
    Clock::time_point deadline;
    {
      std::lock_guard<std::mutex> lock(pace_mu);
      // An idle worker (blocked on its buffer) does not bank time.
      next_deadline = std::max(next_deadline + interval_, Clock::now() - interval_);
      deadline = next_deadline;
    }
    std::this_thread::sleep_until(deadline);
    return input;
  }

 private:
  const Clock::duration interval_;
};

SLUICE_REGISTER_ELEMENT_FUNCTION("bench.pace", "passes elements on at per_second a second (benchmarks)",
                                 [](sluice::FunctionArgs& args)
                                     -> absl::StatusOr<std::unique_ptr<sluice::ElementFunction>> {
                                   absl::StatusOr<double> per_second = args.GetDouble("per_second");
                                   if (!per_second.ok()) return per_second.status();
                                   if (*per_second <= 0) {
                                     return absl::InvalidArgumentError("bench.pace: per_second must be > 0");
                                   }
                                   return std::make_unique<Pace>(*per_second);
                                 });

}  // namespace
