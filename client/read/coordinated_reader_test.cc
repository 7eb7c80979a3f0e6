#include "client/read/coordinated_reader.h"

#include <catch2/catch.hpp>
#include <map>

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

}  // namespace
}  // namespace sluice::reader
