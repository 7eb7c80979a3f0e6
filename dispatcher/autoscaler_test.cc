#include "dispatcher/autoscaler.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <vector>

namespace sluice::dispatcher {
namespace {

using Clock = Autoscaler::Clock;
using std::chrono::seconds;

AutoscalerOptions Options() {
  AutoscalerOptions options;
  options.smoothing = std::chrono::milliseconds(10000);
  options.scale_up_window = std::chrono::milliseconds(6000);
  options.scale_down_window = std::chrono::milliseconds(60000);
  options.max_workers = 100;
  return options;
}

// One job read by one client, evaluated once a second: each Step is one
// second in which the client waits `wait` of it and each task is busy
// `busy` of it.
struct Scenario {
  const Autoscaler::Advice& Step(double wait, double busy) {
    ++second;
    for (int64_t client : job.clients) {
      read[client] += 1;
      waited[client] += wait;
      scaler.NoteClient(client, waited[client], read[client]);
    }
    for (int64_t task : job.tasks) {
      busy_seconds[task] += busy;
      idle_seconds[task] += 1 - busy;
      scaler.NoteTask(task, busy_seconds[task], idle_seconds[task]);
    }
    scaler.Evaluate({job}, job.workers, start + seconds(second));
    return scaler.advice();
  }
  // Steps until `second` reaches `until`; the recommendations, one a step.
  std::vector<int64_t> StepUntil(int64_t until, double wait, double busy) {
    std::vector<int64_t> recommended;
    while (second < until) recommended.push_back(Step(wait, busy).recommended_workers);
    return recommended;
  }

  Autoscaler scaler{Options()};
  const Clock::time_point start = Clock::time_point() + seconds(1000);
  int64_t second = 0;
  Autoscaler::JobInput job{
      .job_id = 7, .job_name = "train", .tenant = "", .workers = 1, .tasks = {1}, .clients = {1}};
  std::map<int64_t, double> read, waited, busy_seconds, idle_seconds;
};

bool All(const std::vector<int64_t>& values, int64_t value) {
  for (int64_t v : values) {
    if (v != value) return false;
  }
  return true;
}

TEST_CASE("autoscaler: one worker too slow: the recommendation rises after the up window, then holds",
          "[dispatcher][autoscaler]") {
  Scenario s;
  // Seconds 1 and 2 are warm-up; second 2's growth over second 1 is the
  // first sample: w = 0.6, B = 1, demand 1 / 0.4 = 2.5, target 3.
  const Autoscaler::Advice& first = s.Step(0.6, 1.0);
  CHECK(first.jobs.empty());
  CHECK(first.recommended_workers == 1);
  CHECK(AdviceLine(first) == "no trainer is reading");
  s.Step(0.6, 1.0);
  REQUIRE(s.scaler.advice().jobs.size() == 1);
  const Autoscaler::JobAdvice& job = s.scaler.advice().jobs[0];
  CHECK(job.job_id == 7);
  CHECK(job.job_name == "train");
  CHECK(job.wait_fraction == Approx(0.6));
  CHECK(job.utilisation == Approx(1.0));
  CHECK(job.workers == 1);
  CHECK(job.recommended_workers == 1);
  // The target has been 3 since second 2: at 8 it has been for 6 s.
  CHECK(All(s.StepUntil(7, 0.6, 1.0), 1));
  CHECK(AdviceLine(s.scaler.advice()) ==
        "trainers wait 60% of the time; the 1 worker is what is recommended for now");
  CHECK(s.Step(0.6, 1.0).recommended_workers == 3);
  CHECK(s.scaler.advice().jobs[0].recommended_workers == 3);
  CHECK(AdviceLine(s.scaler.advice()) ==
        "trainers wait 60% of the time; about 2 more workers would remove it");
  CHECK(All(s.StepUntil(100, 0.6, 1.0), 3));

  SECTION("starting them removes the wait, and the recommendation stays") {
    // Three workers each busy 5/6 of the time: B = 2.5 with no wait, the
    // same demand. The new tasks warm up for 2 s meanwhile.
    s.job.workers = 3;
    s.job.tasks = {1, 2, 3};
    CHECK(All(s.StepUntil(200, 0.0, 2.5 / 3), 3));
    CHECK(s.scaler.advice().wait_fraction < 0.001);
    CHECK(s.scaler.advice().utilisation == Approx(2.5 / 3).epsilon(0.001));
    CHECK(AdviceLine(s.scaler.advice()) == "trainers wait 0% of the time; the 3 workers are enough");
  }
  SECTION("while trainers wait, idle pipelines never make it recommend fewer") {
    s.job.workers = 3;
    s.job.tasks = {1, 2, 3};
    CHECK(All(s.StepUntil(300, 0.5, 0.2), 3));
    CHECK(
        AdviceLine(s.scaler.advice()) ==
        "trainers wait 50% of the time, but the workers' pipelines are busy only 20% of theirs: more workers "
        "would not help (the transfer or the readers are the limit)");
  }
}

TEST_CASE("autoscaler: it falls only once every target of the scale-down window was lower",
          "[dispatcher][autoscaler]") {
  Scenario s;
  s.job.workers = 3;
  s.job.tasks = {1, 2, 3};
  // B = 2.5 on 3 workers, no wait: 3 (ceil(2.5 / 1.1)) from the start.
  CHECK(All(s.StepUntil(20, 0.0, 2.5 / 3), 3));
  // Now B = 1: smoothed, it is 1 + 1.5 e^(-k/10) k s later, so the target
  // is 2 from k = 3 (2.11 / 1.1 <= 2) and 1 from k = 28 (1.09 / 1.1 <= 1).
  const std::vector<int64_t> recommended = s.StepUntil(20 + 120, 0.0, 1.0 / 3);
  // Every target of the 60 s before k = 62 includes k = 2's 3.
  for (int64_t k = 1; k <= 62; ++k) CHECK(recommended[k - 1] == 3);
  for (int64_t k = 63; k <= 87; ++k) CHECK(recommended[k - 1] == 2);
  for (int64_t k = 88; k <= 120; ++k) CHECK(recommended[k - 1] == 1);
  CHECK(AdviceLine(s.scaler.advice()) ==
        "trainers wait 0% of the time and the workers' pipelines are busy 33% of theirs; 2 fewer workers "
        "would do");
}

TEST_CASE("autoscaler: noise alternating around the demand does not flap the recommendation",
          "[dispatcher][autoscaler]") {
  Scenario s;
  // The wait alternates 0.5 and 0.7 (demand 2 and 3.3 by turns), around 0.6.
  std::vector<int64_t> recommended;
  for (int i = 0; i < 150; ++i)
    recommended.push_back(s.Step(i % 2 == 0 ? 0.5 : 0.7, 1.0).recommended_workers);
  CHECK(All({recommended.begin(), recommended.begin() + 7}, 1));
  CHECK(All({recommended.begin() + 7, recommended.end()}, 3));
}

TEST_CASE("autoscaler: the stabiliser moves only when a whole window agrees", "[dispatcher][autoscaler]") {
  const Clock::time_point start = Clock::time_point() + seconds(1000);
  const auto up = seconds(6), down = seconds(60);
  ScalingStabiliser stabiliser(3, start);
  int64_t t = 0;
  // Targets alternating above and below never move it.
  for (; t < 200; ++t) REQUIRE(stabiliser.Update(t % 2 == 0 ? 4 : 2, start + seconds(t), up, down) == 3);
  // Higher at each evaluation for 6 s: it rises to the lowest of them.
  for (int64_t i = 0; i < 6; ++i, ++t)
    REQUIRE(stabiliser.Update(5 + i % 2, start + seconds(t), up, down) == 3);
  CHECK(stabiliser.Update(5, start + seconds(t++), up, down) == 5);
  // Lower for 59 s, then one evaluation at 5 again: the window starts over.
  for (int64_t i = 0; i < 60; ++i, ++t) REQUIRE(stabiliser.Update(1, start + seconds(t), up, down) == 5);
  CHECK(stabiliser.Update(5, start + seconds(t++), up, down) == 5);
  for (int64_t i = 0; i < 60; ++i, ++t) REQUIRE(stabiliser.Update(2, start + seconds(t), up, down) == 5);
  CHECK(stabiliser.Update(1, start + seconds(t++), up, down) == 2);
}

TEST_CASE("autoscaler: draining workers' tasks count as capacity, not as workers",
          "[dispatcher][autoscaler]") {
  Scenario s;
  // Two busy tasks, one of them on a draining worker: B = 2, N = 1.
  s.job.tasks = {1, 2};
  s.StepUntil(20, 0.0, 1.0);
  CHECK(s.scaler.advice().recommended_workers == 2);
  CHECK(s.scaler.advice().jobs[0].workers == 1);
  CHECK(AdviceLine(s.scaler.advice()) == "trainers wait 0% of the time; about 1 more worker would remove it");
}

TEST_CASE("autoscaler: without workers or task figures it holds, and silent readers drop out",
          "[dispatcher][autoscaler]") {
  Scenario s;
  s.job.workers = 4;
  s.job.tasks = {};  // no task has reported: nothing to judge by
  CHECK(All(s.StepUntil(100, 0.9, 1.0), 4));
  s.job.workers = 0;  // every worker gone while the trainer waits
  s.job.tasks = {};
  s.StepUntil(200, 1.0, 1.0);
  CHECK(s.scaler.advice().jobs[0].recommended_workers == 1);
  CHECK(s.scaler.advice().recommended_workers == 1);
  // Values that are not seconds are ignored.
  s.scaler.NoteClient(1, std::nan(""), 1e9);
  s.scaler.NoteClient(1, -1, 1e9);
  s.scaler.NoteTask(1, 1, -1);
  // The client stops growing: 10 s later the job drops out.
  s.job.clients = {1};
  Autoscaler::JobInput silent = s.job;
  for (int64_t k = 1; k <= 11; ++k) s.scaler.Evaluate({silent}, 0, s.start + seconds(s.second + k));
  CHECK(s.scaler.advice().jobs.empty());
  CHECK(AdviceLine(s.scaler.advice()) == "no trainer is reading");
  // A client no job names is forgotten: it starts over (warming up) later.
  s.scaler.Evaluate({}, 0, s.start + seconds(s.second + 12));
  s.scaler.NoteClient(1, 300, 400);
  s.scaler.Evaluate({silent}, 0, s.start + seconds(s.second + 13));
  CHECK(s.scaler.advice().jobs.empty());
}

}  // namespace
}  // namespace sluice::dispatcher
