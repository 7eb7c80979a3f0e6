// DispatcherImpl's GetSplits: leases, runs, retries, and the splits of
// lost tasks handed on.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/dataset_internal.h"
#include "dispatcher/dispatcher_impl.h"
#include "tests/testing/dispatcher_test_util.h"

namespace sluice::dispatcher {
namespace {

TEST_CASE("dispatcher_impl: GetSplits hands out every split of an epoch once", "[dispatcher]") {
  DispatcherImpl d(TestConfig());  // splits_per_request 4, elements_per_split 10
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(
      d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH));

  std::vector<std::pair<int64_t, int64_t>> splits;
  std::vector<int> sizes;
  bool end = false;
  for (int call = 0; call < 20 && !end; ++call) {
    // Both workers' tasks pull from the one provider of the iteration.
    proto::GetSplitsResponse response = Splits(d, it.iteration_id(), 1 + call % 2, 100);
    sizes.push_back(response.splits_size());
    for (const auto& s : response.splits()) splits.emplace_back(s.begin(), s.end());
    end = response.end_of_splits();
  }
  CHECK(end);
  CHECK(sizes == std::vector<int>{4, 4, 2});
  std::vector<std::pair<int64_t, int64_t>> expected;
  for (int64_t b = 0; b < 100; b += 10) expected.emplace_back(b, b + 10);
  CHECK(splits == expected);

  // After the end, still the end.
  proto::GetSplitsResponse after = Splits(d, it.iteration_id(), 1, 4);
  CHECK(after.splits_size() == 0);
  CHECK(after.end_of_splits());
}

TEST_CASE("dispatcher_impl: GetSplits answers consecutive splits as one run", "[dispatcher]") {
  DispatcherImpl d(TestConfig());  // splits_per_request 4, elements_per_split 10
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it =
      Iteration(d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(95))), proto::DISTRIBUTED_EPOCH));
  auto runs = [](const proto::GetSplitsResponse& response) {
    std::vector<Split> out;
    for (const auto& r : response.splits()) out.push_back(SplitFromMessage(r));
    return out;
  };

  // Splits 1-4, 5-8 and 9-10 (the last of 5 positions), one run each.
  CHECK(runs(RawSplits(d, it.iteration_id(), 1, 4, 1)) == std::vector<Split>{{0, 40, 1, 4, 10}});
  CHECK(runs(RawSplits(d, it.iteration_id(), 2, 4, 1)) == std::vector<Split>{{40, 80, 5, 4, 10}});
  const proto::GetSplitsResponse last = RawSplits(d, it.iteration_id(), 1, 4, 2);
  CHECK(runs(last) == std::vector<Split>{{80, 95, 9, 2, 10}});
  CHECK(last.end_of_splits());
  // A retry gets the same run.
  CHECK(runs(RawSplits(d, it.iteration_id(), 2, 4, 1)) == std::vector<Split>{{40, 80, 5, 4, 10}});

  // w2 is lost: its run goes to a new task 3 (task 1 has been told the
  // end), cut to the request's size, then the rest.
  proto::WorkerShutdownRequest shutdown;
  *shutdown.mutable_version() = CurrentVersion();
  shutdown.set_worker_address("w2:2");
  proto::WorkerShutdownResponse shutdown_response;
  REQUIRE(d.WorkerShutdown(shutdown, &shutdown_response).ok());
  const proto::GetSplitsResponse first_part = RawSplits(d, it.iteration_id(), 3, 3, 1);
  CHECK(runs(first_part) == std::vector<Split>{{40, 70, 5, 3, 10}});
  CHECK_FALSE(first_part.end_of_splits());
  const proto::GetSplitsResponse rest = RawSplits(d, it.iteration_id(), 3, 3, 2);
  CHECK(runs(rest) == std::vector<Split>{{70, 80, 8}});
  CHECK(rest.end_of_splits());
}

TEST_CASE("dispatcher_impl: GetSplits honours a smaller max_splits", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  const auto it = Iteration(
      d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH));
  proto::GetSplitsResponse one = Splits(d, it.iteration_id(), 1, 1);
  REQUIRE(one.splits_size() == 1);
  CHECK(one.splits(0).begin() == 0);
  CHECK(one.splits(0).end() == 10);
  CHECK_FALSE(one.end_of_splits());
  // 0 (unset) still gives one.
  proto::GetSplitsResponse zero = Splits(d, it.iteration_id(), 1, 0);
  REQUIRE(zero.splits_size() == 1);
  CHECK(zero.splits(0).begin() == 10);
  CHECK(zero.splits(0).end() == 20);
  proto::GetSplitsResponse two = Splits(d, it.iteration_id(), 1, 2);
  REQUIRE(two.splits_size() == 2);
  CHECK(two.splits(1).begin() == 30);
  CHECK(two.splits(1).end() == 40);
}

TEST_CASE("dispatcher_impl: each distributed_epoch iteration has its own splits", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  const int64_t job =
      Job(d, Register(d, internal::DefinitionOf(Dataset::Range(25))), proto::DISTRIBUTED_EPOCH);
  const auto first = Iteration(d, job, 0);   // task 1
  const auto second = Iteration(d, job, 1);  // task 2
  proto::GetSplitsResponse a = Splits(d, first.iteration_id(), 1, 100);
  CHECK(a.splits_size() == 3);
  CHECK(a.end_of_splits());
  REQUIRE(a.splits_size() == 3);
  CHECK(a.splits(2).begin() == 20);
  CHECK(a.splits(2).end() == 25);
  proto::GetSplitsResponse b = Splits(d, second.iteration_id(), 2, 2);
  REQUIRE(b.splits_size() == 2);
  CHECK(b.splits(0).begin() == 0);
  CHECK_FALSE(b.end_of_splits());
}

TEST_CASE("dispatcher_impl: GetSplits of an iteration without splits is NotFound", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef()), proto::PARALLEL_EPOCHS));
  proto::GetSplitsRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_id(it.iteration_id());
  request.set_task_id(1);
  request.set_max_splits(4);
  proto::GetSplitsResponse response;
  absl::Status status = d.GetSplits(request, &response);
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK(status.message() == "iteration 1 has no splits");
  request.set_iteration_id(77);
  absl::Status unknown = d.GetSplits(request, &response);
  CHECK(unknown.code() == absl::StatusCode::kNotFound);
  CHECK(unknown.message() == "task 1 of iteration 77 is unknown");
}

TEST_CASE("dispatcher_impl: a retried GetSplits gets the same splits, the next request new ones",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  const auto it = Iteration(
      d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH));
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 2)) == BeginsAndSeqs{{20, 3}, {30, 4}});
}

TEST_CASE("dispatcher_impl: a lost worker's splits go to the other task before new ones", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(
      d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH));
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  CHECK(Begins(Splits(d, it.iteration_id(), 2, 1, 1)) == BeginsAndSeqs{{20, 3}});
  Shutdown(d, "w1:1");
  CHECK(Begins(Splits(d, it.iteration_id(), 2, 4, 2)) == BeginsAndSeqs{{0, 1}, {10, 2}, {30, 4}, {40, 5}});
  // The lost task reads nothing more.
  proto::GetSplitsResponse lost = Splits(d, it.iteration_id(), 1, 4, 2);
  CHECK(lost.splits_size() == 0);
  CHECK(lost.end_of_splits());
}

TEST_CASE("dispatcher_impl: returned splits that no task can take get a new task, pushed", "[dispatcher]") {
  std::vector<std::pair<std::string, int64_t>> pushed;
  DispatcherImpl d(TestConfig(), [&](const std::string& address, const proto::TaskDef& task) {
    pushed.emplace_back(address, task.task_id());
  });
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it =
      Iteration(d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(30))), proto::DISTRIBUTED_EPOCH));
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 1, 1)) == BeginsAndSeqs{{0, 1}});
  proto::GetSplitsResponse rest = Splits(d, it.iteration_id(), 2, 4, 1);
  CHECK(Begins(rest) == BeginsAndSeqs{{10, 2}, {20, 3}});
  CHECK(rest.end_of_splits());
  Finish(d, "w2:2", {2});
  Shutdown(d, "w1:1");
  CHECK(pushed == std::vector<std::pair<std::string, int64_t>>{{"w1:1", 1}, {"w2:2", 2}, {"w2:2", 3}});
  proto::ClientHeartbeatResponse listing = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(listing) == Listing{{2, "w2:2"}, {3, "w2:2"}});
  CHECK_FALSE(listing.iteration_finished());
  proto::GetSplitsResponse again = Splits(d, it.iteration_id(), 3, 4, 1);
  CHECK(Begins(again) == BeginsAndSeqs{{0, 1}});
  CHECK(again.end_of_splits());
  Finish(d, "w2:2", {3});
  CHECK(ClientBeat(d, it.iteration_client_id()).iteration_finished());
}

TEST_CASE("dispatcher_impl: splits of a task a client read to its end never return", "[dispatcher]") {
  std::vector<int64_t> pushed;
  DispatcherImpl d(TestConfig(),
                   [&](const std::string&, const proto::TaskDef& task) { pushed.push_back(task.task_id()); });
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it =
      Iteration(d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(30))), proto::DISTRIBUTED_EPOCH));
  Splits(d, it.iteration_id(), 1, 1, 1);
  Splits(d, it.iteration_id(), 2, 4, 1);
  Finish(d, "w1:1", {1});
  Finish(d, "w2:2", {2});
  ClientReport(d, it.iteration_client_id(), {1});
  Shutdown(d, "w1:1");
  CHECK(pushed == std::vector<int64_t>{1, 2});
  CHECK(ClientBeat(d, it.iteration_client_id()).iteration_finished());
  // Task 2 was not read to its end: its worker's loss returns its splits.
  Shutdown(d, "w2:2");
  CHECK_FALSE(ClientBeat(d, it.iteration_client_id()).iteration_finished());
}

TEST_CASE("dispatcher_impl: splits a client reports received are not handed out again", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(
      d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH));
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 3, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}, {20, 3}});
  proto::ClientHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_client_id(it.iteration_client_id());
  request.set_client_secret(d.ClientSecretOf(request.iteration_client_id()));
  request.add_completed_splits(1);
  request.add_completed_splits(3);
  proto::ClientHeartbeatResponse response;
  REQUIRE(d.ClientHeartbeat(request, &response).ok());
  Shutdown(d, "w1:1");
  CHECK(Begins(Splits(d, it.iteration_id(), 2, 4, 1)) == BeginsAndSeqs{{10, 2}, {30, 4}, {40, 5}, {50, 6}});
}

TEST_CASE("dispatcher_impl: splits never handed out outlive the last task's loss", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  const auto it =
      Iteration(d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(30))), proto::DISTRIBUTED_EPOCH));
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 1, 1)) == BeginsAndSeqs{{0, 1}});
  // Split 1 delivered, so nothing is leased when the only worker goes;
  // splits 2 and 3 were never handed out.
  proto::ClientHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_client_id(it.iteration_client_id());
  request.set_client_secret(d.ClientSecretOf(request.iteration_client_id()));
  request.add_completed_splits(1);
  proto::ClientHeartbeatResponse response;
  REQUIRE(d.ClientHeartbeat(request, &response).ok());
  Shutdown(d, "w1:1");
  CHECK_FALSE(ClientBeat(d, it.iteration_client_id()).iteration_finished());
  // The next worker to register reads on.
  CHECK(NewTaskIds(Heartbeat(d, "w2:2")) == std::vector<int64_t>{2});
  proto::GetSplitsResponse rest = Splits(d, it.iteration_id(), 2, 4, 1);
  CHECK(Begins(rest) == BeginsAndSeqs{{10, 2}, {20, 3}});
  CHECK(rest.end_of_splits());
  Finish(d, "w2:2", {2});
  CHECK(ClientBeat(d, it.iteration_client_id()).iteration_finished());
}

TEST_CASE("dispatcher_impl: an endless dataset's iteration outlives its workers", "[dispatcher]") {
  std::vector<std::pair<std::string, int64_t>> pushed;
  DispatcherImpl d(TestConfig(), [&](const std::string& address, const proto::TaskDef& task) {
    pushed.emplace_back(address, task.task_id());
  });
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(
      d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(3).Repeat())), proto::DISTRIBUTED_EPOCH));
  Splits(d, it.iteration_id(), 1, 2, 1);
  Splits(d, it.iteration_id(), 2, 2, 1);
  Shutdown(d, "w1:1");
  CHECK_FALSE(ClientBeat(d, it.iteration_client_id()).iteration_finished());
  Shutdown(d, "w2:2");
  proto::ClientHeartbeatResponse none = ClientBeat(d, it.iteration_client_id());
  CHECK(none.tasks_size() == 0);
  CHECK_FALSE(none.iteration_finished());
  CHECK(NewTaskIds(Heartbeat(d, "w3:3")) == std::vector<int64_t>{3});
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{3, "w3:3"}});
  CHECK(Splits(d, it.iteration_id(), 3, 2, 1).splits_size() == 2);
}

TEST_CASE("dispatcher_impl: a task that ends on its own ends the iteration though splits are left",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  // take(5) before distribute: a worker side ends before its splits do.
  const auto it = Iteration(
      d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100).Take(5))), proto::DISTRIBUTED_EPOCH));
  Splits(d, it.iteration_id(), 1, 1, 1);
  Finish(d, "w1:1", {1});
  ClientReport(d, it.iteration_client_id(), {1});
  CHECK_FALSE(ClientBeat(d, it.iteration_client_id()).iteration_finished());
  Shutdown(d, "w2:2");
  CHECK(ClientBeat(d, it.iteration_client_id()).iteration_finished());
}

TEST_CASE("dispatcher_impl: an iteration no worker may run does not keep the next from its new task",
          "[dispatcher]") {
  std::vector<std::pair<std::string, int64_t>> pushed;
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 200;
  DispatcherImpl d(config, [&](const std::string& address, const proto::TaskDef& task) {
    pushed.emplace_back(address, task.task_id());
  });
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  // Iteration 1, endless: its task on w2 is lost because its clients
  // cannot reach w2 though it heartbeats, so w2 never runs it again; w2
  // stays for the other iterations.
  const auto endless = Iteration(
      d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(3).Repeat())), proto::DISTRIBUTED_EPOCH));
  ClientReport(d, endless.iteration_client_id(), {}, {"w2:2"});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Heartbeat(d, "w2:2", {2});
  ClientReport(d, endless.iteration_client_id(), {}, {"w2:2"});
  REQUIRE(WorkerAddresses(d) == std::vector<std::string>{"w1:1", "w2:2"});
  const proto::WorkerHeartbeatResponse dropped = Heartbeat(d, "w2:2", {2});
  CHECK(std::vector<int64_t>(dropped.tasks_to_delete().begin(), dropped.tasks_to_delete().end()) ==
        std::vector<int64_t>{2});
  CHECK(dropped.new_tasks_size() == 0);
  CHECK(NewTaskIds(Heartbeat(d, "w2:2")).empty());
  // Iteration 2 (tasks 3 on w1, 4 on w2): w2 reads its splits to the end,
  // then w1 shuts down with split 1 leased.
  const auto finite =
      Iteration(d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(30))), proto::DISTRIBUTED_EPOCH));
  CHECK(Begins(Splits(d, finite.iteration_id(), 3, 1, 1)) == BeginsAndSeqs{{0, 1}});
  CHECK(Splits(d, finite.iteration_id(), 4, 4, 1).end_of_splits());
  Finish(d, "w2:2", {4});
  pushed.clear();
  Shutdown(d, "w1:1");
  // Iteration 1 has no worker it may run on; iteration 2's returned split
  // still gets a task on w2.
  CHECK(pushed == std::vector<std::pair<std::string, int64_t>>{{"w2:2", 5}});
  CHECK_FALSE(ClientBeat(d, endless.iteration_client_id()).iteration_finished());
  CHECK(Begins(Splits(d, finite.iteration_id(), 5, 4, 1)) == BeginsAndSeqs{{0, 1}});
}

}  // namespace
}  // namespace sluice::dispatcher
