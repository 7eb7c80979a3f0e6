#include "dispatcher/crash_loop_bound.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>

namespace sluice::dispatcher {
namespace {

using Clock = CrashLoopBound::Clock;
using std::chrono::milliseconds;

DispatcherState::Task TaskOf(int64_t id, int64_t iteration_id = 1) {
  DispatcherState::Task task;
  task.id = id;
  task.iteration_id = iteration_id;
  task.worker_address = "w:" + std::to_string(id);
  return task;
}

// Starts task `id` and loses it `lived_ms` later to a restart.
std::optional<std::string> LoseShortLived(CrashLoopBound& bound, int64_t id, int64_t lived_ms = 100,
                                          int64_t iteration_id = 1) {
  const Clock::time_point start = Clock::now();
  bound.TaskStarted(id, start);
  const Clock::duration lived = bound.TaskEnded(id, start + milliseconds(lived_ms));
  return bound.CountLoss(TaskOf(id, iteration_id), "worker restarted", /*may_be_crash=*/true, lived);
}

TEST_CASE("crash_loop_bound: four short-lived losses in a row fail the iteration, naming them",
          "[dispatcher]") {
  CrashLoopBound bound;
  CHECK_FALSE(LoseShortLived(bound, 1, 100).has_value());
  CHECK_FALSE(LoseShortLived(bound, 2, 200).has_value());
  CHECK_FALSE(LoseShortLived(bound, 3, 300).has_value());
  const std::optional<std::string> cause = LoseShortLived(bound, 4, 400);
  REQUIRE(cause.has_value());
  CHECK(
      *cause ==
      "iteration 1 lost its tasks 4 times in a row, each within 10000 ms of starting, so its pipeline most "
      "likely crashes the workers (see their logs): task 1 on w:1 (worker restarted) after 100 ms; task 2 "
      "on w:2 (worker restarted) after 200 ms; task 3 on w:3 (worker restarted) after 300 ms; task 4 on w:4 "
      "(worker restarted) after 400 ms");
  // The run starts afresh.
  CHECK_FALSE(LoseShortLived(bound, 5).has_value());
}

TEST_CASE("crash_loop_bound: a loss no crash explains, a long-lived task or a finished one ends the run",
          "[dispatcher]") {
  CrashLoopBound bound;
  for (int64_t id = 1; id <= 3; ++id) REQUIRE_FALSE(LoseShortLived(bound, id).has_value());
  SECTION("a shutdown") {
    bound.TaskStarted(10, Clock::now());
    const Clock::duration lived = bound.TaskEnded(10, Clock::now());
    CHECK_FALSE(bound.CountLoss(TaskOf(10), "worker shut down", /*may_be_crash=*/false, lived).has_value());
  }
  SECTION("a task that lived kCrashLoopTaskLifetime") {
    CHECK_FALSE(LoseShortLived(bound, 10, 10000).has_value());
  }
  SECTION("a task not seen to start") {
    const Clock::duration lived = bound.TaskEnded(10, Clock::now());
    CHECK(lived == Clock::duration::max());
    CHECK_FALSE(bound.CountLoss(TaskOf(10), "worker restarted", true, lived).has_value());
  }
  SECTION("a task that ran to its end") {
    bound.TaskStarted(10, Clock::now());
    bound.TaskFinished(10, 1);
    // Finished, it is no longer timed.
    CHECK(bound.TaskEnded(10, Clock::now()) == Clock::duration::max());
  }
  SECTION("the iteration forgotten") { bound.ForgetIteration(1); }
  // Three more short losses are not yet four in a row; the fourth is.
  for (int64_t id = 11; id <= 13; ++id) CHECK_FALSE(LoseShortLived(bound, id).has_value());
  const std::optional<std::string> cause = LoseShortLived(bound, 14);
  REQUIRE(cause.has_value());
  CHECK_THAT(*cause, Catch::Matchers::Contains("): task 11 on w:11 (worker restarted) after 100 ms; "));
}

TEST_CASE("crash_loop_bound: each iteration has its own run, and a forgotten task is not timed",
          "[dispatcher]") {
  CrashLoopBound bound;
  for (int64_t id = 1; id <= 3; ++id) {
    REQUIRE_FALSE(LoseShortLived(bound, id, 100, /*iteration_id=*/1).has_value());
    REQUIRE_FALSE(LoseShortLived(bound, 10 + id, 100, /*iteration_id=*/2).has_value());
  }
  CHECK(LoseShortLived(bound, 4, 100, 1).has_value());
  CHECK(LoseShortLived(bound, 14, 100, 2).has_value());
  bound.TaskStarted(20, Clock::now());
  bound.ForgetTask(20);
  CHECK(bound.TaskEnded(20, Clock::now()) == Clock::duration::max());
}

}  // namespace
}  // namespace sluice::dispatcher
