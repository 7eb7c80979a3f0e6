// Autoscaler: how many workers the jobs need, from what their readers and
// tasks report (docs/design.md, "Autoscaling"). Readers report the seconds
// their trainer waited for elements and the seconds they have read; tasks
// report the seconds their pipeline was busy and the seconds it waited for
// room in a full buffer. At each evaluation, per job:
//
//   w = the readers' time waited / their time read  (smoothed)
//   B = Σ over its tasks of busy / (busy + idle)     (smoothed: busy workers)
//   demand = B / (1 − min(w, 0.95))                  (workers)
//
// The target is the job's workers N when demand / N is within
// kScalingTolerance of 1, else the fewest that carry the demand within it,
// ceil(demand / 1.1); never below N while trainers wait more than the
// tolerance; clipped to [1, max_workers]. The total is
// the largest target among the active jobs. Each recommendation published
// rises only once the targets have all been higher for scale_up_window,
// and falls only once they have all been lower for scale_down_window.
//
// Derived from heartbeats alone, so nothing here is journaled: after a
// restart the advice starts again from the workers there are. The clock is
// the caller's. Not thread-safe: the dispatcher keeps it under
// DispatcherCore's mutex, where a heartbeat only stores its figures
// (NoteClient, NoteTask) and the monitor thread evaluates (Evaluate).
//
//   scaler.NoteClient(client_id, request.wait_seconds(), request.read_seconds());
//   ...each second:
//   scaler.Evaluate(jobs, live_workers, Clock::now());
//   scaler.advice().recommended_workers
#ifndef SLUICE_DISPATCHER_AUTOSCALER_H_
#define SLUICE_DISPATCHER_AUTOSCALER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace sluice::dispatcher {

// A target within this fraction of the workers there are keeps them (the
// HPA's default): the model's error is larger than that.
inline constexpr double kScalingTolerance = 0.1;
// Trainers that wait nearly always say little about how much more is
// needed: at most 20 times the busy workers.
inline constexpr double kMaxWaitFraction = 0.95;
// A read's and a pipeline's first seconds say nothing of the steady state
// (pipelines build, buffers fill), so they are left out, as the HPA leaves
// out a starting pod's CPU.
inline constexpr auto kScalingWarmUp = std::chrono::seconds(2);
// A reader or task whose figures have not grown for this long no longer
// counts; a job with no reader that counts drops out of the advice.
inline constexpr auto kScalingSilence = std::chrono::seconds(10);

struct AutoscalerOptions {
  // The time constant of the exponential smoothing of w and B.
  std::chrono::milliseconds smoothing{10000};
  std::chrono::milliseconds scale_up_window{6000};
  std::chrono::milliseconds scale_down_window{60000};
  int64_t max_workers = 1000;
};

// A recommendation that moves only when its targets agree for a window:
// up once every target of the last `up` is higher, down once every target
// of the last `down` is lower (to the lowest, or highest, of them). A
// window counts only once it has been watched whole.
class ScalingStabiliser {
 public:
  using Clock = std::chrono::steady_clock;

  ScalingStabiliser(int64_t initial, Clock::time_point now) : since_(now), published_(initial) {}

  // Adds the target evaluated at `now` and returns the recommendation.
  int64_t Update(int64_t target, Clock::time_point now, Clock::duration up, Clock::duration down);
  int64_t published() const { return published_; }

 private:
  const Clock::time_point since_;
  int64_t published_;
  std::deque<std::pair<Clock::time_point, int64_t>> targets_;
};

class Autoscaler {
 public:
  using Clock = std::chrono::steady_clock;

  // What the state says of one job at an evaluation.
  struct JobInput {
    int64_t job_id = 0;
    std::string job_name;
    std::string tenant;
    // Live workers, not draining, with a task of its running iterations.
    int64_t workers = 0;
    // Those tasks (on draining workers too: they still serve), and the
    // clients of its running iterations.
    std::vector<int64_t> tasks;
    std::vector<int64_t> clients;
  };

  struct JobAdvice {
    int64_t job_id = 0;
    std::string job_name;
    std::string tenant;
    double wait_fraction = 0;
    double utilisation = 0;
    int64_t workers = 0;
    int64_t recommended_workers = 0;
  };
  struct Advice {
    // The active jobs (with a reader that counts), by id.
    std::vector<JobAdvice> jobs;
    // Over every active job's readers and tasks.
    double wait_fraction = 0;
    double utilisation = 0;
    // Live workers not draining.
    int64_t workers = 0;
    int64_t recommended_workers = 0;
  };

  explicit Autoscaler(AutoscalerOptions options) : options_(options) {}

  // A reader's figures since its read began; a task's since its pipeline
  // began. Only stored: evaluations take their growth. Values that are
  // not finite or below zero are ignored.
  void NoteClient(int64_t client_id, double wait_seconds, double read_seconds);
  void NoteTask(int64_t task_id, double busy_seconds, double idle_seconds);

  // Takes in what grew since the last evaluation and updates the advice.
  // `jobs`: every job with a running iteration; `workers`: live workers
  // not draining. Readers and tasks no job names are forgotten.
  void Evaluate(const std::vector<JobInput>& jobs, int64_t workers, Clock::time_point now);

  // The last evaluation's (before the first: none, and no recommendation).
  const Advice& advice() const { return advice_; }
  const AutoscalerOptions& options() const { return options_; }

 private:
  // One reader's or task's running totals: `part` of `whole` (waited of
  // read, busy of busy + idle).
  struct Meter {
    double part = 0;
    double whole = 0;
    // The totals at the last evaluation that took their growth.
    bool based = false;
    double base_part = 0;
    double base_whole = 0;
    // That growth, used until a newer one, and when it was taken.
    double last_part = 0;
    double last_whole = 0;
    std::optional<Clock::time_point> moved;
    // The evaluation that last named it; older ones are forgotten.
    int64_t named = 0;
  };
  // A smoothed value: the first sample taken whole, then each moves it by
  // 1 − e^(−Δt / smoothing) of the way.
  struct Smoothed {
    std::optional<double> value;
    void Add(double sample, double weight) {
      value = value.has_value() ? *value + weight * (sample - *value) : sample;
    }
  };
  struct JobState {
    JobState(int64_t recommended, Clock::time_point now) : last(now), stabiliser(recommended, now) {}
    Clock::time_point last;
    Smoothed wait;
    Smoothed busy;
    Smoothed utilisation;
    ScalingStabiliser stabiliser;
  };
  // What one job's readers and tasks grew by, as of `now`.
  struct Sample {
    double waited = 0;
    double read = 0;
    double busy_workers = 0;  // Σ busy / (busy + idle)
    int64_t tasks = 0;
  };

  // Takes `meter`'s growth since the last evaluation; whether it counts.
  bool Take(Meter& meter, Clock::time_point now) const;
  Sample SampleOf(const JobInput& job, Clock::time_point now);
  // The job's target from its smoothed figures.
  int64_t Target(const JobState& job, int64_t workers) const;
  double Weight(Clock::time_point last, Clock::time_point now) const;

  const AutoscalerOptions options_;
  absl::flat_hash_map<int64_t, Meter> clients_;
  absl::flat_hash_map<int64_t, Meter> tasks_;
  std::map<int64_t, JobState> jobs_;
  // The total's smoothing and stabiliser, from the first evaluation.
  std::optional<Clock::time_point> last_;
  Smoothed wait_;
  Smoothed utilisation_;
  std::optional<ScalingStabiliser> stabiliser_;
  int64_t evaluations_ = 0;
  Advice advice_;
};

// One line for people: "trainers wait 35% of the time; about 3 more
// workers would remove it".
std::string AdviceLine(const Autoscaler::Advice& advice);

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_AUTOSCALER_H_
