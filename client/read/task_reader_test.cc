#include "client/read/task_reader.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "client/read/empty_answer_transport.h"
#include "client/read/epoch_losses.h"
#include "client/read/transit_losses.h"

namespace sluice::reader {
namespace {

// A worker's task of `total` elements, handed out in calls of up to
// max_elements; the calls numbered in `lose` (and, with `lose_final`, the
// one with the last element) hand their elements out and then fail
// UNAVAILABLE, as a response lost in transit does.
class LossyTransport : public ElementTransport {
 public:
  LossyTransport(int64_t total, std::vector<int> lose, bool lose_final = false)
      : total_(total), lose_(std::move(lose)), lose_final_(lose_final) {}

  absl::Status GetElements(const proto::GetElementsRequest& request, ElementsResponse* response) override {
    absl::MutexLock lock(&mu_);
    const int call = calls_++;
    response->first_index = handed_out_;
    while (handed_out_ < total_ && static_cast<int>(response->elements.size()) < request.max_elements()) {
      response->elements.push_back(Element::Of(Tensor::Scalar<int64_t>(handed_out_++)));
    }
    response->end_of_sequence = response->elements.empty();
    const bool final = !response->elements.empty() && handed_out_ == total_;
    if (std::find(lose_.begin(), lose_.end(), call) != lose_.end() || (lose_final_ && final)) {
      *response = ElementsResponse{};
      return absl::UnavailableError("connection reset");
    }
    return absl::OkStatus();
  }

 private:
  absl::Mutex mu_;
  const int64_t total_;
  const std::vector<int> lose_;
  const bool lose_final_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t handed_out_ ABSL_GUARDED_BY(mu_) = 0;
};

struct Read {
  std::vector<int64_t> values;
  absl::Status end;
  absl::Status status;  // the read's own, as the iterator returns it
};

// Reads task 7 of `transport` to its end with a budget of 4 elements, so
// that each call asks for at most 4. `started` runs once the fetch threads
// have started, as the heartbeat would beside them.
Read ReadTask(std::shared_ptr<ElementTransport> transport, bool sole_reader,
              const std::function<void(ReadState&)>& started = {}) {
  ReadState state(/*max_outstanding_in=*/4, sole_reader, std::nullopt);
  TaskReader reader(state, proto::COMPRESSION_NONE);
  Read read;
  {
    absl::MutexLock lock(&state.mu);
    TaskState& task = state.tasks[7];
    task.worker_address = "127.0.0.1:5000";
    task.transport = std::move(transport);
    reader.Start(7, task);
  }
  if (started) started(state);
  while (true) {
    absl::MutexLock lock(&state.mu);
    state.mu.Await(absl::Condition(
        +[](ReadState* s) { return !s->buffer.empty() || s->tasks.at(7).ended || !s->status.ok(); }, &state));
    while (!state.buffer.empty()) {
      read.values.push_back(state.buffer.front().components[0].data<int64_t>()[0]);
      state.buffer.pop_front();
    }
    if (state.tasks.at(7).ended || !state.status.ok()) break;
  }
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&state.mu);
    state.cancelled = true;
    threads = std::move(state.tasks.at(7).threads);
  }
  for (std::thread& thread : threads) thread.join();
  absl::MutexLock lock(&state.mu);
  while (!state.buffer.empty()) {
    read.values.push_back(state.buffer.front().components[0].data<int64_t>()[0]);
    state.buffer.pop_front();
  }
  read.end = state.TransitLossesOfEndedTasks().Finish(/*allow_partial=*/false);
  read.status = state.status;
  return read;
}

std::vector<int64_t> Iota(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

TEST_CASE("task_reader: a task read without a loss ends OK with every element in order",
          "[client][task_reader]") {
  const Read read = ReadTask(std::make_shared<LossyTransport>(40, std::vector<int>{}), true);
  CHECK(read.values == Iota(0, 40));
  CHECK(read.end.ok());
}

TEST_CASE(
    "task_reader: a response lost in transit from a live worker fails the read naming the task and indices",
    "[client][task_reader]") {
  // Call 2 hands its elements out (how many depends on how the fetch
  // threads share the budget) and its answer is lost; the task ends.
  const Read read = ReadTask(std::make_shared<LossyTransport>(40, std::vector<int>{2}), true);
  std::vector<int64_t> sorted = read.values;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == read.values);  // still in the worker's order
  // What is missing is one run, [first, end), of one call.
  int64_t first = 0;
  while (first < static_cast<int64_t>(read.values.size()) && read.values[first] == first) ++first;
  const int64_t lost = 40 - static_cast<int64_t>(read.values.size());
  REQUIRE(lost >= 1);
  REQUIRE(lost <= 4);
  CHECK(read.values == [&] {
    std::vector<int64_t> expected = Iota(0, first);
    for (int64_t v : Iota(first + lost, 40)) expected.push_back(v);
    return expected;
  }());
  REQUIRE(read.end.code() == absl::StatusCode::kDataLoss);
  const std::string count = lost == 1 ? "1 element" : std::to_string(lost) + " elements";
  const std::string where =
      lost == 1 ? "at index " + std::to_string(first)
                : "at indices " + std::to_string(first) + " to " + std::to_string(first + lost - 1);
  CHECK(
      std::string(read.end.message()) ==
      "responses were lost in transit while their workers lived on (a dropped connection or a call past its "
      "deadline): worker 127.0.0.1:5000 (task 7) lost " +
          count + ", the first " + where + "; " + count +
          " lost in all. Set allow_partial to accept it (distribute(allow_partial=True) in Python, "
          "allow_partial: true in YAML, sluice read --allow-partial)");
}

TEST_CASE("task_reader: the task's last response lost in transit fails the read too",
          "[client][task_reader]") {
  const Read read = ReadTask(std::make_shared<LossyTransport>(40, std::vector<int>{}, true), true);
  const int64_t got = static_cast<int64_t>(read.values.size());
  REQUIRE(got >= 36);
  REQUIRE(got < 40);
  CHECK(read.values == Iota(0, got));
  REQUIRE(read.end.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.end.message()),
             Catch::Contains("worker 127.0.0.1:5000 (task 7) lost " + std::to_string(40 - got)));
  CHECK_THAT(std::string(read.end.message()), Catch::Contains(" the first at ind"));
  CHECK_THAT(std::string(read.end.message()),
             Catch::Contains(std::to_string(got) + (got == 39 ? ";" : " to 39;")));
}

TEST_CASE("task_reader: consumers of a shared job do not count holes in a task's indices",
          "[client][task_reader]") {
  const Read read = ReadTask(std::make_shared<LossyTransport>(40, std::vector<int>{2}), false);
  CHECK(read.values.size() < 40);
  CHECK(read.end.ok());
}

// A fake worker whose every answer is the task's elements 0 to 2 again.
class RepeatingTransport : public ElementTransport {
 public:
  absl::Status GetElements(const proto::GetElementsRequest&, ElementsResponse* response) override {
    response->first_index = 0;
    for (int64_t i = 0; i < 3; ++i) response->elements.push_back(Element::Of(Tensor::Scalar<int64_t>(i)));
    return absl::OkStatus();
  }
};

TEST_CASE("task_reader: a worker that hands out indices again fails the read naming it and the indices",
          "[client][task_reader]") {
  // The first answer goes at once (it starts the task); any later one,
  // whichever fetch thread gets it, repeats its indices.
  const Read read = ReadTask(std::make_shared<RepeatingTransport>(), true);
  CHECK(read.values == Iota(0, 3));
  CHECK(read.status == absl::DataLossError("reading from worker 127.0.0.1:5000: a response of the task's "
                                           "elements [0, 3) came after elements up to index 3 were "
                                           "received: a worker hands out each index once"));
}

// A worker that gets its task after the reader's first request: it answers
// that request empty (the task is not there yet, worker_impl.cc), and the
// answer lands late, over a slow link. Meanwhile the worker got the task
// by heartbeat and made every element, so the reader heard that the
// iteration finished before the empty answer came. Then the task's
// `total` elements, and the end.
class TaskArrivesLateTransport : public ElementTransport {
 public:
  explicit TaskArrivesLateTransport(int64_t total) : total_(total) {}

  absl::Status GetElements(const proto::GetElementsRequest& request, ElementsResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (!has_task_) {
      ++early_requests_;
      mu_.Await(absl::Condition(&early_answers_land_));
      return absl::OkStatus();  // empty, not the end: the task was not here
    }
    response->first_index = handed_out_;
    while (handed_out_ < total_ && static_cast<int>(response->elements.size()) < request.max_elements()) {
      response->elements.push_back(Element::Of(Tensor::Scalar<int64_t>(handed_out_++)));
    }
    response->end_of_sequence = response->elements.empty();
    return absl::OkStatus();
  }
  void WaitForEarlyRequest() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* early) { return *early > 0; }, &early_requests_));
  }
  // Requests from now on find the task.
  void GiveTask() {
    absl::MutexLock lock(&mu_);
    has_task_ = true;
  }
  // The empty answers to the requests that came before land.
  void LandEarlyAnswers() {
    absl::MutexLock lock(&mu_);
    early_answers_land_ = true;
  }

 private:
  absl::Mutex mu_;
  const int64_t total_;
  bool has_task_ ABSL_GUARDED_BY(mu_) = false;
  bool early_answers_land_ ABSL_GUARDED_BY(mu_) = false;
  int early_requests_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t handed_out_ ABSL_GUARDED_BY(mu_) = 0;
};

// An empty answer says the task is over only when the iteration had
// finished before it was asked for: the reader ended such a read whole with
// no element (exit 0; a worker behind a 150 ms link, 2026-11-29).
TEST_CASE(
    "task_reader: an empty answer to a request sent before the iteration finished does not end the task",
    "[client][task_reader]") {
  auto transport = std::make_shared<TaskArrivesLateTransport>(10);
  // In this order, so that every request sent once the iteration finished
  // finds the task: only the early answers are empty.
  const Read read = ReadTask(transport, true, [&](ReadState& state) {
    transport->WaitForEarlyRequest();
    transport->GiveTask();
    {
      absl::MutexLock lock(&state.mu);
      state.iteration_finished = true;
    }
    transport->LandEarlyAnswers();
  });
  CHECK(read.values == Iota(0, 10));
  CHECK(read.end.ok());
  CHECK(read.status.ok());
}

// The case the rule keeps: a worker that no longer has the task (it was
// restarted) answers empty to a request sent after the iteration finished,
// and the task ends there.
TEST_CASE("task_reader: an empty answer to a request sent after the iteration finished ends the task",
          "[client][task_reader]") {
  auto transport = std::make_shared<EmptyAnswerTransport>();
  ReadState state(/*max_outstanding_in=*/4, true, std::nullopt);
  TaskReader reader(state, proto::COMPRESSION_NONE);
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&state.mu);
    state.iteration_finished = true;
    TaskState& task = state.tasks[7];
    task.worker_address = "127.0.0.1:5000";
    task.transport = transport;
    reader.Start(7, task);
    REQUIRE(state.mu.AwaitWithTimeout(absl::Condition(
                                          +[](ReadState* s) { return s->tasks.at(7).ended; }, &state),
                                      absl::Seconds(10)));
    CHECK_FALSE(state.tasks.at(7).read_whole);
    CHECK(state.buffer.empty());
    CHECK(state.completed_tasks.empty());  // not read to its end: nothing to report
    threads = std::move(state.tasks.at(7).threads);
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(transport->calls() >= 1);
}

// A worker's task of `total` elements that makes the first `pause_at` and
// then waits for Resume, as a slow pipeline does: meanwhile its answers are
// empty (OK, no element). It can also forget the task (a restarted worker:
// task_not_here) or refuse connections (a dead one: UNAVAILABLE).
class WorkerOfOneTask : public ElementTransport {
 public:
  WorkerOfOneTask(int64_t total, int64_t pause_at) : total_(total), pause_at_(pause_at) {}

  absl::Status GetElements(const proto::GetElementsRequest& request, ElementsResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    if (refusing_) return absl::UnavailableError("connection refused");
    if (forgotten_) {
      response->task_not_here = true;
      return absl::OkStatus();
    }
    response->first_index = handed_out_;
    const int64_t until = resumed_ ? total_ : pause_at_;
    while (handed_out_ < until &&
           static_cast<int>(response->elements.size()) < std::min(request.max_elements(), 2)) {
      response->elements.push_back(Element::Of(Tensor::Scalar<int64_t>(handed_out_++)));
    }
    if (response->elements.empty() && !resumed_) {
      mu_.AwaitWithTimeout(absl::Condition(&resumed_), absl::Milliseconds(5));
    }
    response->end_of_sequence = response->elements.empty() && handed_out_ == total_;
    return absl::OkStatus();
  }
  void Resume() {
    absl::MutexLock lock(&mu_);
    resumed_ = true;
  }
  void Forget() {
    absl::MutexLock lock(&mu_);
    forgotten_ = true;
  }
  void Refuse() {
    absl::MutexLock lock(&mu_);
    refusing_ = true;
  }
  int64_t handed_out() {
    absl::MutexLock lock(&mu_);
    return handed_out_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  const int64_t total_;
  const int64_t pause_at_;
  int64_t handed_out_ ABSL_GUARDED_BY(mu_) = 0;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool resumed_ ABSL_GUARDED_BY(mu_) = false;
  bool forgotten_ ABSL_GUARDED_BY(mu_) = false;
  bool refusing_ ABSL_GUARDED_BY(mu_) = false;
};

// A parallel_epochs read of task 7 (epochs of 20 elements) that the
// dispatcher unlists as lost, as its heartbeat (ApplyReply) does, while its
// worker holds the rest: what `after` does to the worker decides the end.
struct UnlistedRead {
  std::vector<int64_t> values;
  bool read_whole = false;
  absl::Status end;                      // what EpochLosses says, once settled
  int64_t handed_out_when_unlisted = 0;  // once every request was back
};

UnlistedRead ReadUnlisted(const std::shared_ptr<WorkerOfOneTask>& worker, const std::function<void()>& after,
                          bool whole_epoch = true) {
  std::optional<EpochLosses> losses;
  if (whole_epoch) losses.emplace(/*elements_per_task=*/20, /*shared_job=*/false, /*allow_partial=*/false);
  // Room for the whole epoch: the helper takes elements out only at the end.
  ReadState state(/*max_outstanding_in=*/64, true, std::move(losses));
  TaskReader reader(state, proto::COMPRESSION_NONE);
  UnlistedRead read;
  {
    absl::MutexLock lock(&state.mu);
    TaskState& task = state.tasks[7];
    task.worker_address = "127.0.0.1:5000";
    task.transport = worker;
    reader.Start(7, task);
  }
  while (worker->handed_out() < 6) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    absl::MutexLock lock(&state.mu);
    TaskState& task = state.tasks.at(7);
    task.removed = true;
    state.iteration_finished = true;  // its only task was lost
    if (state.losses.has_value()) {
      state.losses->TaskLost(7, task.worker_address, "no heartbeat for 1500 ms", task.elements);
    }
    state.mu.Await(absl::Condition(
        +[](ReadState* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->outstanding == 0; }, &state));
    read.handed_out_when_unlisted = worker->handed_out();
  }
  // Empty answers after the iteration finished, from a worker still
  // making elements, must not end the task.
  if (whole_epoch) {
    const int calls = worker->calls();
    while (worker->calls() < calls + 8) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  after();
  {
    absl::MutexLock lock(&state.mu);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (true) {
      while (!state.buffer.empty()) {
        read.values.push_back(state.buffer.front().components[0].data<int64_t>()[0]);
        state.buffer.pop_front();
      }
      if (state.Finished() || absl::Now() > deadline) break;
      state.mu.AwaitWithTimeout(absl::Condition(
                                    +[](ReadState* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                      return !s->buffer.empty() || s->Finished();
                                    },
                                    &state),
                                absl::Milliseconds(100));
    }
    REQUIRE(state.Finished());
    read.read_whole = state.tasks.at(7).read_whole;
    if (state.losses.has_value()) {
      state.losses->Settle(7, read.read_whole, state.tasks.at(7).elements);
      read.end = state.losses->Finish(1);
    }
  }
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&state.mu);
    state.cancelled = true;
    threads = std::move(state.tasks.at(7).threads);
  }
  for (std::thread& thread : threads) thread.join();
  return read;
}

TEST_CASE(
    "task_reader: a parallel_epochs task the dispatcher unlisted is read on to its end while its worker "
    "serves",
    "[client][task_reader]") {
  auto worker = std::make_shared<WorkerOfOneTask>(20, 6);
  const UnlistedRead read = ReadUnlisted(worker, [&] { worker->Resume(); });
  CHECK(read.values == Iota(0, 20));
  CHECK(read.read_whole);
  CHECK(read.end.ok());  // the loss the dispatcher's word counted is taken back
}

TEST_CASE("task_reader: an unlisted task ends when its worker no longer has it, its loss counted",
          "[client][task_reader]") {
  auto worker = std::make_shared<WorkerOfOneTask>(20, 6);
  const UnlistedRead read = ReadUnlisted(worker, [&] { worker->Forget(); });
  REQUIRE(read.values.size() >= 6);
  CHECK(read.values == Iota(0, static_cast<int64_t>(read.values.size())));
  CHECK_FALSE(read.read_whole);
  CHECK(read.end.code() == absl::StatusCode::kDataLoss);
  CHECK(std::string(read.end.message()) ==
        "parallel_epochs: the epoch of 1 of 1 worker ended early: worker 127.0.0.1:5000 (task 7, no "
        "heartbeat for "
        "1500 ms) after " +
            std::to_string(read.values.size()) + " of 20 elements; " +
            std::to_string(20 - read.values.size()) +
            " elements lost. Set allow_partial to accept a partial epoch (distribute(allow_partial=True) in "
            "Python, allow_partial: true in YAML, sluice read --allow-partial)");
}

TEST_CASE("task_reader: an unlisted task ends once its worker has refused connections for the grace",
          "[client][task_reader]") {
  auto worker = std::make_shared<WorkerOfOneTask>(20, 6);
  absl::Time refused_at;
  const UnlistedRead read = ReadUnlisted(worker, [&] {
    refused_at = absl::Now();
    worker->Refuse();
  });
  CHECK(absl::Now() - refused_at >= kUnlistedUnreachableGrace);
  CHECK(absl::Now() - refused_at < kUnlistedUnreachableGrace + absl::Seconds(5));
  CHECK_FALSE(read.read_whole);
  CHECK(read.end.code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("task_reader: outside parallel_epochs an unlisted task is not read on (its splits went elsewhere)",
          "[client][task_reader]") {
  auto worker = std::make_shared<WorkerOfOneTask>(20, 6);
  const UnlistedRead read = ReadUnlisted(
      worker,
      [&] {
        worker->Resume();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      },
      /*whole_epoch=*/false);
  // Nothing asked for after the task was unlisted and its requests were back.
  CHECK(worker->handed_out() == read.handed_out_when_unlisted);
  CHECK(read.values == Iota(0, read.handed_out_when_unlisted));
  CHECK_FALSE(read.read_whole);
}

TEST_CASE("transit_losses: holes add up per task, and allow_partial turns the error into OK",
          "[client][task_reader]") {
  TaskIndexGaps gaps;
  gaps.Delivered(0, 10);
  gaps.Delivered(12, 3);  // 10 and 11 lost
  gaps.Delivered(15, 0);  // an empty response that only reports splits
  gaps.Delivered(20, 5);  // 15 to 19 lost
  CHECK(gaps.lost() == 7);
  CHECK(gaps.first_lost() == 10);
  CHECK(gaps.first_lost_end() == 12);
  gaps.Ended(30);  // 25 to 29 lost too
  CHECK(gaps.lost() == 12);
  CHECK(gaps.first_lost() == 10);
  TaskIndexGaps tail;
  tail.Delivered(0, 25);
  CHECK(tail.lost() == 0);
  tail.Ended(30);
  CHECK(tail.lost() == 5);
  CHECK(tail.first_lost() == 25);
  CHECK(tail.first_lost_end() == 30);
  TaskIndexGaps whole;
  whole.Delivered(0, 5);
  whole.Delivered(5, 5);
  whole.Ended(10);
  TransitLosses losses;
  losses.TaskEnded(1, "127.0.0.1:1", whole);
  CHECK(losses.empty());
  CHECK(losses.Finish(false).ok());
  losses.TaskEnded(2, "127.0.0.1:2", gaps);
  TaskIndexGaps one;
  one.Delivered(1, 1);
  one.Ended(2);
  losses.TaskEnded(3, "127.0.0.1:3", one);
  CHECK(
      losses.Describe() ==
      "responses were lost in transit while their workers lived on (a dropped connection or a call past its "
      "deadline): worker 127.0.0.1:2 (task 2) lost 12 elements, the first at indices 10 to 11; worker "
      "127.0.0.1:3 (task 3) lost 1 element, the first at index 0; 13 elements lost in all");
  CHECK(losses.Finish(false).code() == absl::StatusCode::kDataLoss);
  CHECK(losses.Finish(true).ok());
}

}  // namespace
}  // namespace sluice::reader
