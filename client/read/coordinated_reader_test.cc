#include "client/read/coordinated_reader.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <thread>

#include "client/read/empty_answer_transport.h"

namespace sluice::reader {
namespace {

TaskState Task(int64_t starting_round, bool removed = false) {
  TaskState task;
  task.starting_round = starting_round;
  task.removed = removed;
  return task;
}

TEST_CASE("coordinated_reader: rounds go round-robin over the tasks by id", "[client][coordinated]") {
  std::map<int64_t, TaskState> tasks;
  CHECK(TaskForRound(tasks, 0) == 0);  // no task yet
  tasks.emplace(5, Task(0));
  tasks.emplace(2, Task(0));
  tasks.emplace(9, Task(0));
  CHECK(TaskForRound(tasks, 0) == 2);
  CHECK(TaskForRound(tasks, 1) == 5);
  CHECK(TaskForRound(tasks, 2) == 9);
  CHECK(TaskForRound(tasks, 3) == 2);
  CHECK(TaskForRound(tasks, 100) == 5);
}

TEST_CASE("coordinated_reader: a task serves from its starting round, and not once removed",
          "[client][coordinated]") {
  std::map<int64_t, TaskState> tasks;
  tasks.emplace(1, Task(0));
  tasks.emplace(2, Task(0));
  tasks.emplace(3, Task(10));  // a worker that joined later
  CHECK(TaskForRound(tasks, 8) == 1);
  CHECK(TaskForRound(tasks, 9) == 2);
  CHECK(TaskForRound(tasks, 10) == 2);  // 10 % 3 == 1: the second of 1, 2, 3
  CHECK(TaskForRound(tasks, 11) == 3);
  tasks.at(2).removed = true;  // its worker was lost
  CHECK(TaskForRound(tasks, 11) == 3);
  CHECK(TaskForRound(tasks, 12) == 1);
  // No task started by round 5 once 1 is gone too.
  tasks.at(1).removed = true;
  CHECK(TaskForRound(tasks, 5) == 0);
  CHECK(TaskForRound(tasks, 10) == 3);
}

// A worker the task has not reached yet answers every round empty at once.
// The loop used to ask again at once, as if the worker had waited its 50
// ms: 951,071 calls in 300 ms here, until the task reached the worker.
TEST_CASE("coordinated_reader: empty answers that come at once are asked again after a pause",
          "[client][coordinated]") {
  auto transport = std::make_shared<EmptyAnswerTransport>();
  ReadState state(/*max_outstanding_in=*/4, /*sole_reader_in=*/false, std::nullopt);
  {
    absl::MutexLock lock(&state.mu);
    state.round_horizon = 100;
    TaskState& task = state.tasks[1];
    task.worker_address = "127.0.0.1:5000";
    task.transport = transport;
  }
  CoordinatedReader reader(state, proto::COMPRESSION_NONE, /*consumer_index=*/0);
  std::thread loop([&] { reader.RoundLoop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    absl::MutexLock lock(&state.mu);
    state.cancelled = true;
  }
  loop.join();
  // Pauses of 10, 20, 40, 80 and 160 ms fit in 300 ms: 5 or 6 calls.
  CHECK(transport->calls() >= 2);
  CHECK(transport->calls() <= 8);
  absl::MutexLock lock(&state.mu);
  CHECK(state.buffer.empty());
  CHECK(state.current_round == 0);
  CHECK(state.status.ok());
}

}  // namespace
}  // namespace sluice::reader
