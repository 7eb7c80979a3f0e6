#include "dispatcher/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::dispatcher {
namespace {

bool ValidSeconds(double seconds) { return std::isfinite(seconds) && seconds >= 0; }

std::string Workers(int64_t count) { return absl::StrCat(count, count == 1 ? " worker" : " workers"); }

}  // namespace

int64_t ScalingStabiliser::Update(int64_t target, Clock::time_point now, Clock::duration up,
                                  Clock::duration down) {
  targets_.emplace_back(now, target);
  while (targets_.front().first < now - std::max(up, down)) targets_.pop_front();
  // The lowest (or highest) target of the window: the recommendation
  // moves only as far as every target in it agrees.
  auto extreme = [&](Clock::duration window, bool lowest) {
    int64_t value = target;
    for (const auto& [time, earlier] : targets_) {
      if (time >= now - window) value = lowest ? std::min(value, earlier) : std::max(value, earlier);
    }
    return value;
  };
  if (now - since_ >= up) published_ = std::max(published_, extreme(up, /*lowest=*/true));
  if (now - since_ >= down) published_ = std::min(published_, extreme(down, /*lowest=*/false));
  return published_;
}

void Autoscaler::NoteClient(int64_t client_id, double wait_seconds, double read_seconds) {
  if (!ValidSeconds(wait_seconds) || !ValidSeconds(read_seconds)) return;
  Meter& meter = clients_[client_id];
  meter.whole = read_seconds;
  meter.part = std::min(wait_seconds, read_seconds);
}

void Autoscaler::NoteTask(int64_t task_id, double busy_seconds, double idle_seconds) {
  if (!ValidSeconds(busy_seconds) || !ValidSeconds(idle_seconds)) return;
  Meter& meter = tasks_[task_id];
  meter.part = busy_seconds;
  meter.whole = busy_seconds + idle_seconds;
}

bool Autoscaler::Take(Meter& meter, Clock::time_point now) const {
  const bool went_back = meter.whole < meter.base_whole || meter.part < meter.base_part;
  const bool warming_up = meter.whole < std::chrono::duration<double>(kScalingWarmUp).count();
  // A reader or task first heard now (or again, after a restart of
  // either side) counts from here, not from its start.
  if (!meter.based || went_back || warming_up) {
    meter.based = true;
    meter.base_part = meter.part;
    meter.base_whole = meter.whole;
  } else if (meter.whole > meter.base_whole) {
    meter.last_part = meter.part - meter.base_part;
    meter.last_whole = meter.whole - meter.base_whole;
    meter.base_part = meter.part;
    meter.base_whole = meter.whole;
    meter.moved = now;
  }
  return meter.moved.has_value() && now - *meter.moved <= kScalingSilence;
}

Autoscaler::Sample Autoscaler::SampleOf(const JobInput& job, Clock::time_point now) {
  Sample sample;
  for (int64_t id : job.clients) {
    auto it = clients_.find(id);
    if (it == clients_.end()) continue;
    it->second.named = evaluations_;
    if (!Take(it->second, now)) continue;
    sample.waited += it->second.last_part;
    sample.read += it->second.last_whole;
  }
  for (int64_t id : job.tasks) {
    auto it = tasks_.find(id);
    if (it == tasks_.end()) continue;
    it->second.named = evaluations_;
    if (!Take(it->second, now)) continue;
    sample.busy_workers += std::clamp(it->second.last_part / it->second.last_whole, 0.0, 1.0);
    ++sample.tasks;
  }
  return sample;
}

double Autoscaler::Weight(Clock::time_point last, Clock::time_point now) const {
  const double elapsed = std::chrono::duration<double>(now - last).count();
  const double constant = std::chrono::duration<double>(options_.smoothing).count();
  return constant <= 0 ? 1.0 : 1.0 - std::exp(-elapsed / constant);
}

int64_t Autoscaler::Target(const JobState& job, int64_t workers) const {
  const auto clip = [this](double count) {
    return static_cast<int64_t>(std::clamp<double>(count, 1, static_cast<double>(options_.max_workers)));
  };
  // No task has said how busy it is yet (or none runs): nothing to go by.
  if (!job.busy.value.has_value()) return clip(static_cast<double>(workers));
  const double wait = *job.wait.value;
  const double demand = *job.busy.value / (1 - std::min(wait, kMaxWaitFraction));
  // The fewest workers that carry the demand within the tolerance, which
  // a smoothed demand that only nears a whole number also reaches.
  double target = std::ceil(demand / (1 + kScalingTolerance));
  if (workers > 0 && std::abs(demand / static_cast<double>(workers) - 1) <= kScalingTolerance) {
    target = static_cast<double>(workers);
  }
  // Trainers that wait while the pipelines idle wait for something else
  // (the transfer, the reader): fewer workers would not shorten it.
  if (wait > kScalingTolerance) target = std::max(target, static_cast<double>(workers));
  return clip(target);
}

void Autoscaler::Evaluate(const std::vector<JobInput>& jobs, int64_t workers, Clock::time_point now) {
  ++evaluations_;
  Advice advice;
  advice.workers = workers;
  Sample all;
  int64_t total_target = 1;  // no trainer reads: one worker is enough
  std::set<int64_t> active;
  for (const JobInput& job : jobs) {
    const Sample sample = SampleOf(job, now);
    if (sample.read <= 0) continue;  // no reader that counts
    // Until its windows have passed, a job's recommendation is what it has.
    JobState& state =
        jobs_.try_emplace(job.job_id, std::clamp<int64_t>(job.workers, 1, options_.max_workers), now)
            .first->second;
    const double weight = Weight(state.last, now);
    state.last = now;
    state.wait.Add(sample.waited / sample.read, weight);
    // No task left (every worker gone): no capacity. Tasks that have not
    // reported yet leave B as it was.
    if (job.tasks.empty()) state.busy.Add(0, weight);
    if (sample.tasks > 0) {
      state.busy.Add(sample.busy_workers, weight);
      state.utilisation.Add(sample.busy_workers / static_cast<double>(sample.tasks), weight);
    }
    const int64_t target = Target(state, job.workers);
    total_target = std::max(total_target, target);
    advice.jobs.push_back({.job_id = job.job_id,
                           .job_name = job.job_name,
                           .tenant = job.tenant,
                           .wait_fraction = *state.wait.value,
                           .utilisation = state.utilisation.value.value_or(0),
                           .workers = job.workers,
                           .recommended_workers = state.stabiliser.Update(
                               target, now, options_.scale_up_window, options_.scale_down_window)});
    active.insert(job.job_id);
    all.waited += sample.waited;
    all.read += sample.read;
    all.busy_workers += sample.busy_workers;
    all.tasks += sample.tasks;
  }
  std::sort(advice.jobs.begin(), advice.jobs.end(),
            [](const JobAdvice& a, const JobAdvice& b) { return a.job_id < b.job_id; });
  // Jobs without readers start afresh when they come back; readers and
  // tasks of no job are forgotten.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = active.contains(it->first) ? std::next(it) : jobs_.erase(it);
  }
  for (auto* meters : {&clients_, &tasks_}) {
    for (auto it = meters->begin(); it != meters->end();) {
      if (it->second.named == evaluations_) {
        ++it;
      } else {
        meters->erase(it++);
      }
    }
  }
  const double weight = last_.has_value() ? Weight(*last_, now) : 1.0;
  last_ = now;
  if (all.read > 0) {
    wait_.Add(all.waited / all.read, weight);
  } else {
    wait_ = {};
  }
  if (all.tasks > 0) {
    utilisation_.Add(all.busy_workers / static_cast<double>(all.tasks), weight);
  } else if (all.read <= 0) {
    utilisation_ = {};
  }
  const auto clip = [this](int64_t count) { return std::clamp<int64_t>(count, 1, options_.max_workers); };
  if (!stabiliser_.has_value()) stabiliser_.emplace(clip(workers), now);
  advice.wait_fraction = wait_.value.value_or(0);
  advice.utilisation = utilisation_.value.value_or(0);
  advice.recommended_workers =
      stabiliser_->Update(clip(total_target), now, options_.scale_up_window, options_.scale_down_window);
  advice_ = std::move(advice);
}

std::string AdviceLine(const Autoscaler::Advice& advice) {
  if (advice.recommended_workers == 0) return "";  // not evaluated yet
  if (advice.jobs.empty()) return "no trainer is reading";
  const std::string wait = absl::StrFormat("trainers wait %.0f%% of the time", advice.wait_fraction * 100);
  const std::string busy = absl::StrFormat("%.0f%%", advice.utilisation * 100);
  const int64_t more = advice.recommended_workers - advice.workers;
  if (more > 0)
    return absl::StrCat(wait, "; about ", more, " more ", more == 1 ? "worker" : "workers",
                        " would remove it");
  if (more < 0) {
    return absl::StrCat(wait, " and the workers' pipelines are busy ", busy, " of theirs; ", -more, " fewer ",
                        -more == 1 ? "worker" : "workers", " would do");
  }
  if (advice.wait_fraction > kScalingTolerance && advice.utilisation < 1 - kScalingTolerance) {
    return absl::StrCat(
        wait, ", but the workers' pipelines are busy only ", busy,
        " of theirs: more workers would not help (the transfer or the readers are the limit)");
  }
  return absl::StrCat(wait, "; the ", Workers(advice.workers), advice.workers == 1 ? " is " : " are ",
                      advice.wait_fraction > kScalingTolerance ? "what is recommended for now" : "enough");
}

}  // namespace sluice::dispatcher
