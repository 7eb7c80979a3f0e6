// PipelineLoad: how a task's pipeline has spent its time since it began,
// which every worker heartbeat reports (TaskLoad) for the dispatcher's
// autoscaling (docs/design.md, "Autoscaling"). Idle is the time it waited
// for room in a full buffer (its readers did not keep up); busy is the
// rest, building and producing. Both stop when the pipeline ends. Not
// thread-safe: the task keeps it under its lock.
//
//   load.Begin(now);  ...  load.WaitBegins(now); Await(room); load.WaitEnds(now);
//   auto [busy, idle] = load.At(now);
#ifndef SLUICE_WORKER_PIPELINE_LOAD_H_
#define SLUICE_WORKER_PIPELINE_LOAD_H_

#include <algorithm>
#include <chrono>
#include <optional>

namespace sluice::worker {

class PipelineLoad {
 public:
  using Clock = std::chrono::steady_clock;

  struct Seconds {
    double busy = 0;
    double idle = 0;
  };

  void Begin(Clock::time_point now) { began_ = now; }
  void End(Clock::time_point now) {
    if (!ended_.has_value()) ended_ = now;
  }
  void WaitBegins(Clock::time_point now) { waiting_since_ = now; }
  void WaitEnds(Clock::time_point now) {
    if (waiting_since_.has_value()) idle_ += now - *waiting_since_;
    waiting_since_.reset();
  }

  // Zero before it began; a wait under way counts as idle.
  Seconds At(Clock::time_point now) const {
    if (!began_.has_value()) return {};
    const Clock::time_point until = ended_.value_or(now);
    Clock::duration idle = idle_;
    if (waiting_since_.has_value()) idle += std::max(until - *waiting_since_, Clock::duration::zero());
    const Clock::duration elapsed = std::max(until - *began_, Clock::duration::zero());
    return {.busy = std::chrono::duration<double>(std::max(elapsed - idle, Clock::duration::zero())).count(),
            .idle = std::chrono::duration<double>(idle).count()};
  }

 private:
  std::optional<Clock::time_point> began_;
  std::optional<Clock::time_point> ended_;
  std::optional<Clock::time_point> waiting_since_;
  Clock::duration idle_ = Clock::duration::zero();
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_PIPELINE_LOAD_H_
