// Draining a worker: DispatcherState's DrainWorker (journaled, in
// snapshots, cleared by RemoveWorker, the splits a drained task leaves),
// and DispatcherImpl's DrainWorker RPC, draining heartbeats and GetSplits.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "client/dataset_internal.h"
#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/dispatcher_state.h"
#include "tests/testing/dispatcher_test_util.h"
#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

proto::Update Worker(const std::string& address) {
  proto::Update update;
  update.mutable_register_worker()->set_address(address);
  return update;
}

proto::Update Drain(const std::string& address) {
  proto::Update update;
  update.mutable_drain_worker()->set_address(address);
  return update;
}

proto::Update Task(int64_t id, const std::string& address) {
  proto::Update update;
  update.mutable_create_task()->set_task_id(id);
  update.mutable_create_task()->set_iteration_id(1);
  update.mutable_create_task()->set_worker_address(address);
  return update;
}

proto::Update Finish(int64_t id) {
  proto::Update update;
  update.mutable_finish_task()->set_task_id(id);
  return update;
}

// A distributed_epoch iteration 1 over range(100) with tasks 1 on w1:1 and
// 2 on w2:2; its split provider has not run out.
DispatcherState TwoTasks() {
  DispatcherState state;
  proto::Update dataset;
  dataset.mutable_register_dataset()->set_dataset_id("1000");
  *dataset.mutable_register_dataset()->mutable_dataset() = internal::DefinitionOf(Dataset::Range(100));
  proto::Update job;
  job.mutable_create_job()->set_job_id(1);
  job.mutable_create_job()->mutable_params()->set_dataset_id("1000");
  job.mutable_create_job()->mutable_params()->set_processing_mode(proto::DISTRIBUTED_EPOCH);
  proto::Update iteration;
  iteration.mutable_create_iteration()->set_iteration_id(1);
  iteration.mutable_create_iteration()->set_job_id(1);
  for (const proto::Update& update :
       {dataset, Worker("w1:1"), Worker("w2:2"), job, iteration, Task(1, "w1:1"), Task(2, "w2:2")}) {
    REQUIRE(state.Apply(update).ok());
  }
  return state;
}

TEST_CASE("dispatcher_state: DrainWorker marks the worker and its running tasks until it is removed",
          "[dispatcher][drain]") {
  DispatcherState state = TwoTasks();
  REQUIRE(state.Apply(Finish(2)).ok());
  const std::string before = state.ToSnapshot().SerializeAsString();
  // An unknown worker is refused and changes nothing.
  CHECK(absl::IsFailedPrecondition(state.Apply(Drain("w9:9"))));
  CHECK(state.ToSnapshot().SerializeAsString() == before);

  REQUIRE(state.Apply(Drain("w1:1")).ok());
  REQUIRE(state.Apply(Drain("w2:2")).ok());
  CHECK(state.IsDraining("w1:1"));
  CHECK(state.FindTask(1)->drained);
  // Finished before the drain: not cut short by it.
  CHECK_FALSE(state.FindTask(2)->drained);

  // A snapshot keeps both, and reads back to the same state.
  const proto::StateSnapshot snapshot = state.ToSnapshot();
  CHECK(snapshot.draining_workers_size() == 2);
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(snapshot);
  REQUIRE(restored.ok());
  CHECK(restored->IsDraining("w1:1"));
  CHECK(restored->FindTask(1)->drained);
  CHECK(restored->ToSnapshot().SerializeAsString() == snapshot.SerializeAsString());

  proto::Update remove;
  remove.mutable_remove_worker()->set_address("w1:1");
  REQUIRE(state.Apply(remove).ok());
  CHECK_FALSE(state.IsDraining("w1:1"));
  CHECK(state.IsDraining("w2:2"));
  // Back at the same address, it is a worker like any other.
  REQUIRE(state.Apply(Worker("w1:1")).ok());
  CHECK_FALSE(state.IsDraining("w1:1"));

  // A snapshot naming a draining worker that is not registered is damaged.
  proto::StateSnapshot damaged = state.ToSnapshot();
  damaged.add_draining_workers("w9:9");
  CHECK(absl::IsDataLoss(DispatcherState::FromSnapshot(damaged).status()));
}

TEST_CASE("dispatcher_state: an iteration whose tasks all drained waits for a task to read its other splits",
          "[dispatcher][drain]") {
  DispatcherState state = TwoTasks();
  SECTION("tasks that end on their own end the iteration (a take before distribute)") {
    REQUIRE(state.Apply(Finish(1)).ok());
    REQUIRE(state.Apply(Finish(2)).ok());
    CHECK(state.FindIteration(1)->finished);
  }
  SECTION("drained tasks leave the splits not handed out to a task yet to be made") {
    REQUIRE(state.Apply(Drain("w1:1")).ok());
    REQUIRE(state.Apply(Finish(1)).ok());
    // w2's task reads on.
    CHECK_FALSE(state.FindIteration(1)->finished);
    REQUIRE(state.Apply(Drain("w2:2")).ok());
    REQUIRE(state.Apply(Finish(2)).ok());
    CHECK(state.HasUnreadSplits(*state.FindIteration(1)));
    CHECK_FALSE(state.FindIteration(1)->finished);
  }
}

proto::WorkerHeartbeatResponse DrainingBeat(DispatcherImpl& d, const std::string& address,
                                            const std::vector<int64_t>& current) {
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address);
  request.mutable_current_tasks()->Add(current.begin(), current.end());
  request.set_draining(true);
  return CallOk(d, &DispatcherImpl::WorkerHeartbeat, request);
}

absl::Status DrainRpc(DispatcherImpl& d, const std::string& address) {
  proto::DrainWorkerRequest request;
  request.set_worker_address(address);
  proto::DrainWorkerResponse response;
  return Call(d, &DispatcherImpl::DrainWorker, request, &response);
}

bool Draining(DispatcherImpl& d, const std::string& address) {
  const proto::GetWorkersResponse workers =
      CallOk(d, &DispatcherImpl::GetWorkers, proto::GetWorkersRequest());
  for (const proto::WorkerInfo& info : workers.workers()) {
    if (info.address() == address) return info.draining();
  }
  FAIL("no worker " << address);
  return false;
}

TEST_CASE("dispatcher_impl: a drained worker's task ends its splits, the others read on, nothing repeats",
          "[dispatcher][drain]") {
  DispatcherImpl d(TestConfig());  // splits_per_request 4, elements_per_split 10
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const int64_t job =
      Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH);
  const auto it = Iteration(d, job);
  // Task 1 (w1) holds splits 1-4 when its worker drains.
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 4, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}, {20, 3}, {30, 4}});

  SECTION("by the DrainWorker RPC") {
    const absl::Status unknown = DrainRpc(d, "w9:9");
    CHECK(absl::IsNotFound(unknown));
    CHECK_THAT(std::string(unknown.message()), Catch::Contains("w9:9"));
    REQUIRE(DrainRpc(d, "w1:1").ok());
    REQUIRE(DrainRpc(d, "w1:1").ok());  // again: nothing more
    CHECK(Heartbeat(d, "w1:1", {1}).drain());
  }
  SECTION("by the worker's heartbeat after SIGTERM") { CHECK(DrainingBeat(d, "w1:1", {1}).drain()); }
  CHECK(Draining(d, "w1:1"));
  CHECK_FALSE(Draining(d, "w2:2"));
  CHECK_FALSE(Heartbeat(d, "w2:2", {2}).drain());

  // Task 1 gets the end; its splits stay its own. Task 2 reads the rest.
  const proto::GetSplitsResponse ended = Splits(d, it.iteration_id(), 1, 4, 2);
  CHECK(ended.splits_size() == 0);
  CHECK(ended.end_of_splits());
  // A retry of task 1's last lease still gets that lease.
  CHECK(Splits(d, it.iteration_id(), 1, 4, 1).splits_size() == 4);
  std::vector<int64_t> seqs;
  bool end = false;
  for (int64_t request = 1; request < 10 && !end; ++request) {
    const proto::GetSplitsResponse response = Splits(d, it.iteration_id(), 2, 4, request);
    for (const auto& split : response.splits()) seqs.push_back(split.seq());
    end = response.end_of_splits();
  }
  CHECK(end);
  CHECK(seqs == std::vector<int64_t>{5, 6, 7, 8, 9, 10});

  // A new iteration makes no task on the draining worker.
  const auto second = Iteration(d, job, 1);
  CHECK(Listed(ClientBeat(d, second.iteration_client_id())) == Listing{{3, "w2:2"}});
  CHECK(NewTaskIds(Heartbeat(d, "w1:1", {1})).empty());

  // The reader learns task 1 was drained; once it read task 1 to its end,
  // the worker may drop it, and its leaving returns no split.
  Finish(d, "w1:1", {1});
  const proto::ClientHeartbeatResponse beat = ClientReport(d, it.iteration_client_id(), {1});
  CHECK(std::vector<int64_t>(beat.drained_tasks().begin(), beat.drained_tasks().end()) ==
        std::vector<int64_t>{1});
  const proto::WorkerHeartbeatResponse dropped = Heartbeat(d, "w1:1", {1});
  CHECK(std::vector<int64_t>(dropped.tasks_to_delete().begin(), dropped.tasks_to_delete().end()) ==
        std::vector<int64_t>{1});
  Shutdown(d, "w1:1");
  Finish(d, "w2:2", {2});
  const proto::ClientHeartbeatResponse last = ClientReport(d, it.iteration_client_id(), {2});
  CHECK(last.iteration_finished());
  CHECK(last.lost_tasks_size() == 0);
}

TEST_CASE("dispatcher_impl: a drain survives a restart, and a worker back draining gets no task",
          "[dispatcher][drain]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  SECTION("from the journal") {}
  SECTION("from snapshots taken every 2 records") { config.snapshot_interval = 2; }
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
    Heartbeat(d, "w2:2");
    REQUIRE(DrainRpc(d, "w1:1").ok());
  }
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  CHECK(Draining(d, "w1:1"));
  // A worker that registers draining (say, its dispatcher lost its state).
  CHECK(DrainingBeat(d, "w3:3", {}).drain());
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{1, "w2:2"}});
}

}  // namespace
}  // namespace sluice::dispatcher
