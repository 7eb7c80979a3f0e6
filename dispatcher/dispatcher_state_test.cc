#include "dispatcher/dispatcher_state.h"

#include <array>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "client/dataset_internal.h"
#include "pipeline/split_provider.h"
#include "sluice/dataset.h"

namespace sluice::dispatcher {
namespace {

using Updates = std::vector<proto::Update>;

proto::DatasetDef RangeDef(int64_t n) { return internal::DefinitionOf(Dataset::Range(n).Map("square")); }

proto::Update RegisterDataset(const std::string& id, const std::string& fingerprint, int64_t n = 10) {
  proto::Update update;
  auto* u = update.mutable_register_dataset();
  u->set_dataset_id(id);
  u->set_fingerprint(fingerprint);
  *u->mutable_dataset() = RangeDef(n);
  return update;
}

proto::Update RegisterWorker(const std::string& address, std::vector<std::string> tags = {}) {
  proto::Update update;
  update.mutable_register_worker()->set_address(address);
  for (const std::string& tag : tags) update.mutable_register_worker()->add_tags(tag);
  return update;
}

proto::Update CreateJob(int64_t job_id, const std::string& dataset_id, const std::string& name = "",
                        proto::ProcessingMode mode = proto::PARALLEL_EPOCHS) {
  proto::Update update;
  auto* u = update.mutable_create_job();
  u->set_job_id(job_id);
  u->mutable_params()->set_dataset_id(dataset_id);
  u->mutable_params()->set_processing_mode(mode);
  u->mutable_params()->set_job_name(name);
  return update;
}

proto::Update CreateIteration(int64_t iteration_id, int64_t job_id, int64_t repetition) {
  proto::Update update;
  auto* u = update.mutable_create_iteration();
  u->set_iteration_id(iteration_id);
  u->set_job_id(job_id);
  u->set_repetition(repetition);
  return update;
}

proto::Update CreateTask(int64_t task_id, int64_t iteration_id, const std::string& worker) {
  proto::Update update;
  auto* u = update.mutable_create_task();
  u->set_task_id(task_id);
  u->set_iteration_id(iteration_id);
  u->set_worker_address(worker);
  return update;
}

proto::Update Acquire(int64_t client_id, int64_t iteration_id) {
  proto::Update update;
  update.mutable_acquire_iteration_client()->set_iteration_client_id(client_id);
  update.mutable_acquire_iteration_client()->set_iteration_id(iteration_id);
  return update;
}

proto::Update Release(int64_t client_id) {
  proto::Update update;
  update.mutable_release_iteration_client()->set_iteration_client_id(client_id);
  return update;
}

proto::Update FinishTask(int64_t task_id) {
  proto::Update update;
  update.mutable_finish_task()->set_task_id(task_id);
  return update;
}

proto::Update RemoveWorker(const std::string& address) {
  proto::Update update;
  update.mutable_remove_worker()->set_address(address);
  return update;
}

void ApplyAll(DispatcherState& state, const Updates& updates) {
  for (const proto::Update& update : updates) {
    absl::Status status = state.Apply(update);
    INFO(update.ShortDebugString() << " -> " << status.ToString());
    REQUIRE(status.ok());
  }
}

std::vector<int64_t> TaskIds(const std::vector<const DispatcherState::Task*>& tasks) {
  std::vector<int64_t> ids;
  for (const auto* task : tasks) ids.push_back(task->id);
  return ids;
}

// A typical history: a dataset, two workers, a named job with two
// iterations, tasks, clients, a finished task, a released client and a
// removed worker.
Updates History() {
  return {
      RegisterDataset("1000", "fp-a"),
      RegisterWorker("w1:1", {"gpu"}),
      RegisterWorker("w2:2"),
      CreateJob(1, "1000", "shared"),
      CreateIteration(1, 1, 0),
      CreateTask(1, 1, "w1:1"),
      CreateTask(2, 1, "w2:2"),
      Acquire(1, 1),
      Acquire(2, 1),
      CreateIteration(2, 1, 1),
      CreateTask(3, 2, "w1:1"),
      CreateTask(4, 2, "w2:2"),
      Acquire(3, 2),
      FinishTask(1),
      Release(2),
      RemoveWorker("w2:2"),
      RegisterDataset("1001", "fp-b", 20),
      CreateJob(2, "1001"),
  };
}

// Everything observable through the lookups, as one comparable string.
std::string Describe(const DispatcherState& state) {
  std::string out;
  for (const auto& [id, d] : state.datasets()) {
    out += "dataset " + id + " fp=" + d.fingerprint + " def=" + d.def.ShortDebugString();
    const auto* by_fp = state.FindDatasetByFingerprint(d.fingerprint);
    out += " by_fp=" + (by_fp == nullptr ? std::string("none") : by_fp->id) + "\n";
  }
  for (const auto& [address, w] : state.workers()) {
    out += "worker " + address + " tags=";
    for (const auto& t : w.tags) out += t + ",";
    out += " tasks=";
    for (int64_t id : TaskIds(state.TasksOfWorker(address))) out += std::to_string(id) + ",";
    out += "\n";
  }
  for (const auto& [id, j] : state.jobs()) {
    out += "job " + std::to_string(id) + " params=" + j.params.ShortDebugString() + " iterations=";
    for (const auto& [repetition, i] : j.iterations)
      out += std::to_string(repetition) + ":" + std::to_string(i) + ",";
    if (!j.params.job_name().empty()) {
      const auto* by_name = state.FindJobByName(j.params.job_name());
      out += " by_name=" + (by_name == nullptr ? std::string("none") : std::to_string(by_name->id));
    }
    out += "\n";
  }
  for (const auto& [id, it] : state.iterations()) {
    out += "iteration " + std::to_string(id) + " job=" + std::to_string(it.job_id) +
           " rep=" + std::to_string(it.repetition) + " finished=" + std::to_string(it.finished) +
           " collected=" + std::to_string(it.collected) + " tasks=";
    for (int64_t t : it.tasks) out += std::to_string(t) + ",";
    out += " clients=";
    for (int64_t c : it.clients) {
      out += std::to_string(c) + "->" + std::to_string(state.IterationOfClient(c).value_or(-1)) + ",";
    }
    const auto* by_rep = state.FindIterationForRepetition(it.job_id, it.repetition);
    out += " by_rep=" + (by_rep == nullptr ? std::string("none") : std::to_string(by_rep->id)) + "\n";
  }
  for (const auto& [id, t] : state.tasks()) {
    out += "task " + std::to_string(id) + " iteration=" + std::to_string(t.iteration_id) +
           " worker=" + t.worker_address + " finished=" + std::to_string(t.finished) + "\n";
  }
  out += "next job=" + std::to_string(state.NextJobId()) +
         " iteration=" + std::to_string(state.NextIterationId()) +
         " task=" + std::to_string(state.NextTaskId()) +
         " client=" + std::to_string(state.NextIterationClientId()) + " dataset=" + state.NextDatasetId() +
         "\n";
  return out;
}

TEST_CASE("dispatcher_state: a fresh state is empty with the first ids", "[dispatcher]") {
  DispatcherState state;
  CHECK(state.datasets().empty());
  CHECK(state.workers().empty());
  CHECK(state.jobs().empty());
  CHECK(state.iterations().empty());
  CHECK(state.tasks().empty());
  CHECK(state.NextDatasetId() == "1000");
  CHECK(state.NextJobId() == 1);
  CHECK(state.NextIterationId() == 1);
  CHECK(state.NextTaskId() == 1);
  CHECK(state.NextIterationClientId() == 1);
  CHECK(state.FindDataset("1000") == nullptr);
  CHECK(state.FindDatasetByFingerprint("") == nullptr);
  CHECK(state.FindJob(1) == nullptr);
  CHECK(state.FindJobByName("") == nullptr);
  CHECK(state.FindIteration(1) == nullptr);
  CHECK(state.FindIterationForRepetition(1, 0) == nullptr);
  CHECK_FALSE(state.IterationOfClient(1).has_value());
  CHECK(state.FindTask(1) == nullptr);
  CHECK(state.FindWorker("w:1") == nullptr);
  CHECK(state.TasksOfWorker("w:1").empty());
}

TEST_CASE("dispatcher_state: RegisterDataset is found by id and by fingerprint", "[dispatcher]") {
  DispatcherState state;
  REQUIRE(state.Apply(RegisterDataset("1000", "fp-a")).ok());
  const auto* dataset = state.FindDataset("1000");
  REQUIRE(dataset != nullptr);
  CHECK(dataset->id == "1000");
  CHECK(dataset->fingerprint == "fp-a");
  CHECK(dataset->def.SerializeAsString() == RangeDef(10).SerializeAsString());
  CHECK(state.FindDatasetByFingerprint("fp-a") == dataset);
  CHECK(state.FindDatasetByFingerprint("fp-b") == nullptr);
  CHECK(state.FindDataset("1001") == nullptr);
  CHECK(state.NextDatasetId() == "1001");
  CHECK(state.datasets().size() == 1);
}

TEST_CASE("dispatcher_state: only the id it gave moves NextDatasetId", "[dispatcher]") {
  DispatcherState state;
  REQUIRE(state.Apply(RegisterDataset("1000", "fp-x")).ok());
  CHECK(state.NextDatasetId() == "1001");
  // Another number (an old journal's explicit id) does not move it: the
  // largest int64 once locked every later registration out.
  REQUIRE(state.Apply(RegisterDataset("9223372036854775807", "fp-a")).ok());
  CHECK(state.NextDatasetId() == "1001");
  REQUIRE(state.Apply(RegisterDataset("7", "fp-b")).ok());
  CHECK(state.NextDatasetId() == "1001");
  // An explicit number the counter reaches later is passed over then.
  REQUIRE(state.Apply(RegisterDataset("1003", "fp-d")).ok());
  CHECK(state.NextDatasetId() == "1001");
  REQUIRE(state.Apply(RegisterDataset("1001", "fp-e")).ok());
  REQUIRE(state.Apply(RegisterDataset("1002", "fp-f")).ok());
  CHECK(state.NextDatasetId() == "1004");
  // A named (non-numeric) id does not move it at all.
  REQUIRE(state.Apply(RegisterDataset("my-dataset", "fp-c")).ok());
  CHECK(state.NextDatasetId() == "1004");
  CHECK(state.FindDataset("my-dataset") != nullptr);
  CHECK(state.FindDatasetByFingerprint("fp-c")->id == "my-dataset");
  CHECK(state.datasets().size() == 7);
}

TEST_CASE("dispatcher_state: a duplicate dataset id is FailedPrecondition and changes nothing",
          "[dispatcher]") {
  DispatcherState state;
  REQUIRE(state.Apply(RegisterDataset("1000", "fp-a")).ok());
  absl::Status status = state.Apply(RegisterDataset("1000", "fp-b", 20));
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(status.message() == "dataset 1000 already exists");
  CHECK(state.FindDataset("1000")->fingerprint == "fp-a");
  CHECK(state.FindDatasetByFingerprint("fp-b") == nullptr);
  CHECK(state.datasets().size() == 1);
}

TEST_CASE("dispatcher_state: the first dataset of a fingerprint is the one found by it", "[dispatcher]") {
  DispatcherState state;
  REQUIRE(state.Apply(RegisterDataset("1000", "fp-a")).ok());
  REQUIRE(state.Apply(RegisterDataset("named", "fp-a")).ok());
  CHECK(state.FindDatasetByFingerprint("fp-a")->id == "1000");
  CHECK(state.FindDataset("named")->fingerprint == "fp-a");
  CHECK(state.datasets().size() == 2);
}

TEST_CASE("dispatcher_state: RegisterWorker records its tags, again replaces them", "[dispatcher]") {
  DispatcherState state;
  REQUIRE(state.Apply(RegisterWorker("w1:1", {"gpu", "big"})).ok());
  const auto* worker = state.FindWorker("w1:1");
  REQUIRE(worker != nullptr);
  CHECK(worker->address == "w1:1");
  CHECK(worker->tags == std::vector<std::string>{"gpu", "big"});
  CHECK(state.FindWorker("w2:2") == nullptr);
  REQUIRE(state.Apply(RegisterWorker("w1:1", {"cpu"})).ok());
  CHECK(state.workers().size() == 1);
  CHECK(state.FindWorker("w1:1")->tags == std::vector<std::string>{"cpu"});
}

TEST_CASE("dispatcher_state: CreateJob is found by id and name", "[dispatcher]") {
  DispatcherState state;
  REQUIRE(state.Apply(RegisterDataset("1000", "fp-a")).ok());
  REQUIRE(state.Apply(CreateJob(1, "1000", "shared", proto::DISTRIBUTED_EPOCH)).ok());
  const auto* job = state.FindJob(1);
  REQUIRE(job != nullptr);
  CHECK(job->id == 1);
  CHECK(job->params.dataset_id() == "1000");
  CHECK(job->params.processing_mode() == proto::DISTRIBUTED_EPOCH);
  CHECK(job->params.job_name() == "shared");
  CHECK(job->iterations.empty());
  CHECK(state.FindJobByName("shared") == job);
  CHECK(state.FindJobByName("other") == nullptr);
  CHECK(state.NextJobId() == 2);

  // An anonymous job is not found by the empty name.
  REQUIRE(state.Apply(CreateJob(2, "1000")).ok());
  CHECK(state.FindJob(2) != nullptr);
  CHECK(state.FindJobByName("") == nullptr);
  CHECK(state.NextJobId() == 3);

  // An id past the next one moves NextJobId beyond it.
  REQUIRE(state.Apply(CreateJob(10, "1000")).ok());
  CHECK(state.NextJobId() == 11);
  REQUIRE(state.Apply(CreateJob(5, "1000")).ok());
  CHECK(state.NextJobId() == 11);
  CHECK(state.jobs().size() == 4);
}

TEST_CASE("dispatcher_state: CreateJob with an unknown dataset or a taken id is FailedPrecondition",
          "[dispatcher]") {
  DispatcherState state;
  absl::Status unknown = state.Apply(CreateJob(1, "1000"));
  CHECK(unknown.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(unknown.message() == "cannot create job 1");
  CHECK(state.FindJob(1) == nullptr);
  CHECK(state.NextJobId() == 1);

  REQUIRE(state.Apply(RegisterDataset("1000", "fp-a")).ok());
  REQUIRE(state.Apply(CreateJob(1, "1000", "a")).ok());
  absl::Status duplicate = state.Apply(CreateJob(1, "1000", "b", proto::DISTRIBUTED_EPOCH));
  CHECK(duplicate.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(duplicate.message() == "cannot create job 1");
  CHECK(state.FindJob(1)->params.job_name() == "a");
  CHECK(state.FindJob(1)->params.processing_mode() == proto::PARALLEL_EPOCHS);
  CHECK(state.FindJobByName("b") == nullptr);
  CHECK(state.jobs().size() == 1);
}

TEST_CASE("dispatcher_state: CreateIteration is found by id and repetition", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, {RegisterDataset("1000", "fp-a"), CreateJob(1, "1000")});
  REQUIRE(state.Apply(CreateIteration(1, 1, 0)).ok());
  const auto* iteration = state.FindIteration(1);
  REQUIRE(iteration != nullptr);
  CHECK(iteration->id == 1);
  CHECK(iteration->job_id == 1);
  CHECK(iteration->repetition == 0);
  CHECK(iteration->tasks.empty());
  CHECK(iteration->clients.empty());
  CHECK(state.FindIterationForRepetition(1, 0) == iteration);
  CHECK(state.FindIterationForRepetition(1, 1) == nullptr);
  CHECK(state.FindIterationForRepetition(1, -1) == nullptr);
  CHECK(state.FindIterationForRepetition(2, 0) == nullptr);
  CHECK(state.FindJob(1)->iterations == std::map<int64_t, int64_t>{{0, 1}});
  CHECK(state.NextIterationId() == 2);

  // Repetitions may come out of order; gaps are not found.
  REQUIRE(state.Apply(CreateIteration(2, 1, 2)).ok());
  CHECK(state.FindJob(1)->iterations == std::map<int64_t, int64_t>{{0, 1}, {2, 2}});
  CHECK(state.FindIterationForRepetition(1, 1) == nullptr);
  CHECK(state.FindIterationForRepetition(1, 2)->id == 2);
  REQUIRE(state.Apply(CreateIteration(3, 1, 1)).ok());
  CHECK(state.FindJob(1)->iterations == std::map<int64_t, int64_t>{{0, 1}, {1, 3}, {2, 2}});
  CHECK(state.FindIterationForRepetition(1, 1)->id == 3);
  CHECK(state.NextIterationId() == 4);
}

TEST_CASE("dispatcher_state: CreateIteration with an unknown job or a taken id is FailedPrecondition",
          "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, {RegisterDataset("1000", "fp-a"), CreateJob(1, "1000")});
  absl::Status unknown = state.Apply(CreateIteration(1, 7, 0));
  CHECK(unknown.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(unknown.message() == "cannot create iteration 1");
  CHECK(state.FindIteration(1) == nullptr);
  CHECK(state.NextIterationId() == 1);

  REQUIRE(state.Apply(CreateIteration(1, 1, 0)).ok());
  absl::Status duplicate = state.Apply(CreateIteration(1, 1, 1));
  CHECK(duplicate.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(duplicate.message() == "cannot create iteration 1");
  CHECK(state.FindIteration(1)->repetition == 0);
  CHECK(state.FindIterationForRepetition(1, 1) == nullptr);
  CHECK(state.FindJob(1)->iterations == std::map<int64_t, int64_t>{{0, 1}});
}

TEST_CASE("dispatcher_state: CreateTask attaches the task to its iteration and worker", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, {RegisterDataset("1000", "fp-a"), RegisterWorker("w1:1"), RegisterWorker("w2:2"),
                   CreateJob(1, "1000"), CreateIteration(1, 1, 0), CreateIteration(2, 1, 1)});
  REQUIRE(state.Apply(CreateTask(1, 1, "w1:1")).ok());
  REQUIRE(state.Apply(CreateTask(2, 1, "w2:2")).ok());
  REQUIRE(state.Apply(CreateTask(3, 2, "w1:1")).ok());
  const auto* task = state.FindTask(1);
  REQUIRE(task != nullptr);
  CHECK(task->id == 1);
  CHECK(task->iteration_id == 1);
  CHECK(task->worker_address == "w1:1");
  CHECK_FALSE(task->finished);
  CHECK(state.FindIteration(1)->tasks == std::vector<int64_t>{1, 2});
  CHECK(state.FindIteration(2)->tasks == std::vector<int64_t>{3});
  CHECK(TaskIds(state.TasksOfWorker("w1:1")) == std::vector<int64_t>{1, 3});
  CHECK(TaskIds(state.TasksOfWorker("w2:2")) == std::vector<int64_t>{2});
  CHECK(state.TasksOfWorker("w3:3").empty());
  CHECK(state.NextTaskId() == 4);
}

TEST_CASE("dispatcher_state: CreateTask with an unknown iteration or a taken id is FailedPrecondition",
          "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, {RegisterDataset("1000", "fp-a"), RegisterWorker("w1:1"), CreateJob(1, "1000"),
                   CreateIteration(1, 1, 0)});
  absl::Status unknown = state.Apply(CreateTask(1, 9, "w1:1"));
  CHECK(unknown.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(unknown.message() == "cannot create task 1");
  CHECK(state.FindTask(1) == nullptr);
  CHECK(state.NextTaskId() == 1);

  REQUIRE(state.Apply(CreateTask(1, 1, "w1:1")).ok());
  absl::Status duplicate = state.Apply(CreateTask(1, 1, "w2:2"));
  CHECK(duplicate.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(duplicate.message() == "cannot create task 1");
  CHECK(state.FindTask(1)->worker_address == "w1:1");
  CHECK(state.FindIteration(1)->tasks == std::vector<int64_t>{1});
  CHECK(state.TasksOfWorker("w2:2").empty());
}

TEST_CASE("dispatcher_state: iteration clients are acquired and released", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, {RegisterDataset("1000", "fp-a"), CreateJob(1, "1000"), CreateIteration(1, 1, 0),
                   CreateIteration(2, 1, 1)});
  REQUIRE(state.Apply(Acquire(1, 1)).ok());
  REQUIRE(state.Apply(Acquire(2, 1)).ok());
  REQUIRE(state.Apply(Acquire(3, 2)).ok());
  CHECK(state.IterationOfClient(1) == std::optional<int64_t>(1));
  CHECK(state.IterationOfClient(2) == std::optional<int64_t>(1));
  CHECK(state.IterationOfClient(3) == std::optional<int64_t>(2));
  CHECK_FALSE(state.IterationOfClient(4).has_value());
  CHECK(state.FindIteration(1)->clients == std::set<int64_t>{1, 2});
  CHECK(state.FindIteration(2)->clients == std::set<int64_t>{3});
  CHECK(state.NextIterationClientId() == 4);

  REQUIRE(state.Apply(Release(1)).ok());
  CHECK_FALSE(state.IterationOfClient(1).has_value());
  CHECK(state.FindIteration(1)->clients == std::set<int64_t>{2});
  // Ids are never reused.
  CHECK(state.NextIterationClientId() == 4);

  absl::Status again = state.Apply(Release(1));
  CHECK(again.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(again.message() == "unknown iteration client 1");
  CHECK(state.FindIteration(1)->clients == std::set<int64_t>{2});

  absl::Status unknown_iteration = state.Apply(Acquire(4, 9));
  CHECK(unknown_iteration.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(unknown_iteration.message() == "cannot add client 4 to iteration 9");
  CHECK_FALSE(state.IterationOfClient(4).has_value());
  CHECK(state.NextIterationClientId() == 4);
}

TEST_CASE("dispatcher_state: an iteration is finished only once every task is", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, {RegisterDataset("1000", "fp-a"), RegisterWorker("w1:1"), RegisterWorker("w2:2"),
                   CreateJob(1, "1000"), CreateIteration(1, 1, 0)});
  // No tasks: not finished.
  CHECK_FALSE(state.FindIteration(1)->finished);

  REQUIRE(state.Apply(CreateTask(1, 1, "w1:1")).ok());
  REQUIRE(state.Apply(CreateTask(2, 1, "w2:2")).ok());
  CHECK_FALSE(state.FindIteration(1)->finished);

  REQUIRE(state.Apply(FinishTask(1)).ok());
  CHECK(state.FindTask(1)->finished);
  CHECK_FALSE(state.FindTask(2)->finished);
  CHECK_FALSE(state.FindIteration(1)->finished);

  // Finishing twice is harmless.
  REQUIRE(state.Apply(FinishTask(1)).ok());
  CHECK_FALSE(state.FindIteration(1)->finished);

  REQUIRE(state.Apply(FinishTask(2)).ok());
  CHECK(state.FindIteration(1)->finished);

  // A task added later makes it unfinished again.
  REQUIRE(state.Apply(CreateTask(3, 1, "w1:1")).ok());
  CHECK_FALSE(state.FindIteration(1)->finished);
  REQUIRE(state.Apply(FinishTask(3)).ok());
  CHECK(state.FindIteration(1)->finished);
}

TEST_CASE("dispatcher_state: FinishTask of an unknown task is FailedPrecondition", "[dispatcher]") {
  DispatcherState state;
  absl::Status status = state.Apply(FinishTask(42));
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(status.message() == "unknown task 42");
  CHECK(state.tasks().empty());
  CHECK(state.iterations().empty());
}

TEST_CASE("dispatcher_state: RemoveWorker finishes that worker's unfinished tasks only", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state,
           {RegisterDataset("1000", "fp-a"), RegisterWorker("w1:1"), RegisterWorker("w2:2"),
            CreateJob(1, "1000"), CreateIteration(1, 1, 0), CreateTask(1, 1, "w1:1"),
            CreateTask(2, 1, "w2:2"), CreateIteration(2, 1, 1), CreateTask(3, 2, "w1:1"),
            CreateTask(4, 2, "w2:2"), CreateIteration(3, 1, 2), CreateTask(5, 3, "w2:2"), FinishTask(4)});
  REQUIRE(state.Apply(RemoveWorker("w2:2")).ok());
  CHECK(state.FindWorker("w2:2") == nullptr);
  CHECK(state.FindWorker("w1:1") != nullptr);
  CHECK(state.workers().size() == 1);
  // Its tasks stay known, finished.
  CHECK(TaskIds(state.TasksOfWorker("w2:2")) == std::vector<int64_t>{2, 4, 5});
  CHECK(state.FindTask(2)->finished);
  CHECK(state.FindTask(4)->finished);
  CHECK(state.FindTask(5)->finished);
  // The other worker's tasks are untouched.
  CHECK_FALSE(state.FindTask(1)->finished);
  CHECK_FALSE(state.FindTask(3)->finished);
  // Iteration 3 had only the removed worker's task: finished. The others
  // still wait for w1.
  CHECK_FALSE(state.FindIteration(1)->finished);
  CHECK_FALSE(state.FindIteration(2)->finished);
  CHECK(state.FindIteration(3)->finished);

  REQUIRE(state.Apply(FinishTask(1)).ok());
  CHECK(state.FindIteration(1)->finished);

  REQUIRE(state.Apply(RemoveWorker("w1:1")).ok());
  CHECK(state.workers().empty());
  CHECK(state.FindTask(3)->finished);
  CHECK(state.FindIteration(2)->finished);
}

TEST_CASE("dispatcher_state: RemoveWorker of an unknown worker changes nothing", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, History());
  const std::string before = Describe(state);
  CHECK(state.Apply(RemoveWorker("nobody:1")).ok());
  CHECK(Describe(state) == before);
}

TEST_CASE("dispatcher_state: an empty update is InvalidArgument", "[dispatcher]") {
  DispatcherState state;
  absl::Status status = state.Apply(proto::Update());
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "empty update");
  CHECK(Describe(state) == Describe(DispatcherState()));
}

TEST_CASE("dispatcher_state: failed updates change nothing", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, History());
  const std::string before = Describe(state);
  const Updates bad = {RegisterDataset("1000", "fp-z"),
                       CreateJob(1, "1000"),
                       CreateJob(9, "nope"),
                       CreateIteration(1, 1, 5),
                       CreateIteration(9, 99, 0),
                       CreateTask(1, 1, "w1:1"),
                       CreateTask(9, 99, "w1:1"),
                       Acquire(9, 99),
                       Release(99),
                       FinishTask(99),
                       proto::Update()};
  for (const proto::Update& update : bad) {
    INFO(update.ShortDebugString());
    CHECK_FALSE(state.Apply(update).ok());
    CHECK(Describe(state) == before);
  }
}

TEST_CASE("dispatcher_state: next ids only grow", "[dispatcher]") {
  DispatcherState state;
  int64_t job = state.NextJobId();
  int64_t iteration = state.NextIterationId();
  int64_t task = state.NextTaskId();
  int64_t client = state.NextIterationClientId();
  for (const proto::Update& update : History()) {
    REQUIRE(state.Apply(update).ok());
    CHECK(state.NextJobId() >= job);
    CHECK(state.NextIterationId() >= iteration);
    CHECK(state.NextTaskId() >= task);
    CHECK(state.NextIterationClientId() >= client);
    job = state.NextJobId();
    iteration = state.NextIterationId();
    task = state.NextTaskId();
    client = state.NextIterationClientId();
  }
  CHECK(state.NextJobId() == 3);
  CHECK(state.NextIterationId() == 3);
  CHECK(state.NextTaskId() == 5);
  CHECK(state.NextIterationClientId() == 4);
  CHECK(state.NextDatasetId() == "1002");
  // Every id handed out is below the next one, and never reused.
  for (const auto& [id, j] : state.jobs()) CHECK(id < state.NextJobId());
  for (const auto& [id, i] : state.iterations()) CHECK(id < state.NextIterationId());
  for (const auto& [id, t] : state.tasks()) CHECK(id < state.NextTaskId());
}

TEST_CASE("dispatcher_state: the history's lookups", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, History());
  CHECK(state.FindDatasetByFingerprint("fp-a")->id == "1000");
  CHECK(state.FindDatasetByFingerprint("fp-b")->id == "1001");
  CHECK(state.FindJobByName("shared")->id == 1);
  CHECK(state.FindJob(2)->params.job_name().empty());
  CHECK(state.FindIterationForRepetition(1, 0)->id == 1);
  CHECK(state.FindIterationForRepetition(1, 1)->id == 2);
  CHECK(state.FindIterationForRepetition(2, 0) == nullptr);
  CHECK(state.IterationOfClient(1) == std::optional<int64_t>(1));
  CHECK_FALSE(state.IterationOfClient(2).has_value());
  CHECK(state.IterationOfClient(3) == std::optional<int64_t>(2));
  CHECK(state.FindIteration(1)->clients == std::set<int64_t>{1});
  CHECK(state.FindIteration(2)->clients == std::set<int64_t>{3});
  CHECK(TaskIds(state.TasksOfWorker("w1:1")) == std::vector<int64_t>{1, 3});
  CHECK(TaskIds(state.TasksOfWorker("w2:2")) == std::vector<int64_t>{2, 4});
  CHECK(state.FindWorker("w1:1")->tags == std::vector<std::string>{"gpu"});
  CHECK(state.FindWorker("w2:2") == nullptr);
  // Iteration 1: task 1 finished, task 2 ended with w2. Iteration 2: task 3
  // still runs on w1.
  CHECK(state.FindIteration(1)->finished);
  CHECK_FALSE(state.FindIteration(2)->finished);
}

TEST_CASE("dispatcher_state: replaying the same updates rebuilds identical lookups", "[dispatcher]") {
  const Updates history = History();
  DispatcherState first;
  ApplyAll(first, history);
  DispatcherState second;
  ApplyAll(second, history);
  CHECK(Describe(first) == Describe(second));

  // A replay that also meets the failed updates the live state refused
  // (they are journaled only when applied, but must be harmless) still
  // ends the same.
  DispatcherState third;
  for (const proto::Update& update : history) {
    REQUIRE(third.Apply(update).ok());
    (void)third.Apply(proto::Update());
    (void)third.Apply(FinishTask(1000));
  }
  CHECK(Describe(third) == Describe(first));

  // Every prefix replays to the same state as applying it live.
  for (size_t n = 0; n <= history.size(); ++n) {
    DispatcherState a;
    DispatcherState b;
    ApplyAll(a, Updates(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(n)));
    ApplyAll(b, Updates(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(n)));
    INFO("prefix of " << n << " updates");
    CHECK(Describe(a) == Describe(b));
  }
}

TEST_CASE("dispatcher_state: updates survive a serialization round trip", "[dispatcher]") {
  // The journal stores updates as bytes; replaying the parsed copies gives
  // the same state.
  DispatcherState live;
  DispatcherState replayed;
  for (const proto::Update& update : History()) {
    REQUIRE(live.Apply(update).ok());
    proto::Update parsed;
    REQUIRE(parsed.ParseFromString(update.SerializeAsString()));
    REQUIRE(replayed.Apply(parsed).ok());
  }
  CHECK(Describe(replayed) == Describe(live));
  CHECK(replayed.FindIteration(1)->finished);
  CHECK(replayed.FindJobByName("shared")->iterations == std::map<int64_t, int64_t>{{0, 1}, {1, 2}});
}

TEST_CASE("dispatcher_state: GarbageCollectIteration needs an iteration without clients", "[dispatcher]") {
  DispatcherState state;
  ApplyAll(state, {RegisterDataset("d", "fp"), RegisterWorker("w1:1"), CreateJob(1, "d"),
                   CreateIteration(1, 1, 0), CreateTask(1, 1, "w1:1"), Acquire(1, 1)});
  proto::Update collect;
  collect.mutable_garbage_collect_iteration()->set_iteration_id(1);
  const std::string before = Describe(state);
  CHECK(state.Apply(collect) == absl::FailedPreconditionError("cannot collect iteration 1"));
  CHECK(Describe(state) == before);
  collect.mutable_garbage_collect_iteration()->set_iteration_id(7);
  CHECK(state.Apply(collect) == absl::FailedPreconditionError("cannot collect iteration 7"));

  REQUIRE(state.Apply(Release(1)).ok());
  collect.mutable_garbage_collect_iteration()->set_iteration_id(1);
  REQUIRE(state.Apply(collect).ok());
  const DispatcherState::Iteration* iteration = state.FindIteration(1);
  CHECK(iteration->collected);
  CHECK(iteration->finished);  // though its task never finished
  CHECK_FALSE(state.FindTask(1)->finished);
  // Later updates of its tasks keep it finished.
  REQUIRE(state.Apply(RemoveWorker("w1:1")).ok());
  CHECK(state.FindIteration(1)->finished);
}

proto::Update Lease(int64_t task_id, int64_t request_id, const std::vector<std::array<int64_t, 3>>& splits,
                    bool provider_exhausted = false) {
  proto::Update update;
  auto* u = update.mutable_lease_splits();
  u->set_task_id(task_id);
  u->set_request_id(request_id);
  for (const auto& [seq, begin, end] : splits) {
    proto::SplitLease* lease = u->add_splits();
    lease->set_seq(seq);
    lease->set_begin(begin);
    lease->set_end(end);
  }
  u->set_cursor("cursor" + std::to_string(request_id));
  u->set_provider_exhausted(provider_exhausted);
  u->set_end_of_splits(provider_exhausted);
  return update;
}

proto::Update LeaseRuns(int64_t task_id, int64_t request_id, const std::vector<Split>& runs) {
  proto::Update update = Lease(task_id, request_id, {});
  for (const Split& run : runs) SplitToMessage(run, update.mutable_lease_splits()->add_splits());
  return update;
}

// Every split's seq, runs expanded.
std::vector<int64_t> Seqs(const SplitRuns& runs) {
  std::vector<int64_t> seqs;
  for (const auto& [first, run] : runs) {
    CHECK(first == run.seq);
    for (int64_t seq = run.seq; seq < run.seq + run.count; ++seq) seqs.push_back(seq);
  }
  return seqs;
}

std::vector<Split> Runs(const SplitRuns& runs) {
  std::vector<Split> values;
  for (const auto& [first, run] : runs) values.push_back(run);
  return values;
}

// Two workers, a distributed_epoch iteration 1 with tasks 1 (w1) and 2 (w2).
DispatcherState LeasingState() {
  DispatcherState state;
  ApplyAll(state, {RegisterDataset("d", "f", 100), RegisterWorker("w1"), RegisterWorker("w2"),
                   CreateJob(1, "d", "", proto::DISTRIBUTED_EPOCH), CreateIteration(1, 1, 0),
                   CreateTask(1, 1, "w1"), CreateTask(2, 1, "w2")});
  return state;
}

TEST_CASE("dispatcher_state: a lost worker's leased splits return to its iteration", "[dispatcher]") {
  DispatcherState state = LeasingState();
  ApplyAll(state,
           {Lease(1, 1, {{1, 0, 10}, {2, 10, 20}}), Lease(2, 1, {{3, 20, 30}}), Lease(1, 2, {{4, 30, 40}})});
  CHECK(Seqs(state.FindTask(1)->leases) == std::vector<int64_t>{1, 2, 4});
  CHECK(state.FindTask(1)->last_split_request == 2);
  CHECK(state.FindTask(1)->last_split_response == std::vector<Split>{{30, 40, 4}});
  CHECK(state.FindIteration(1)->next_split_seq == 5);
  CHECK(state.FindIteration(1)->split_cursor == "cursor2");

  ApplyAll(state, {RemoveWorker("w1")});
  CHECK(Seqs(state.FindIteration(1)->returned_splits) == std::vector<int64_t>{1, 2, 4});
  CHECK(state.FindTask(1)->leases.empty());
  CHECK(state.FindTask(1)->lost);
  // w2 finishes, but the returned splits still need a reader.
  ApplyAll(state, {FinishTask(2)});
  CHECK_FALSE(state.FindIteration(1)->finished);

  // A new task takes them back, keeping their numbers; new splits follow.
  ApplyAll(state, {CreateTask(3, 1, "w2"), Lease(3, 1, {{1, 0, 10}, {4, 30, 40}, {5, 40, 50}})});
  CHECK(Seqs(state.FindIteration(1)->returned_splits) == std::vector<int64_t>{2});
  CHECK(state.FindIteration(1)->next_split_seq == 6);
  ApplyAll(state, {Lease(3, 2, {{2, 10, 20}}, true)});
  CHECK(state.FindIteration(1)->returned_splits.empty());
  CHECK(state.FindIteration(1)->splits_exhausted);
  ApplyAll(state, {FinishTask(3)});
  CHECK(state.FindIteration(1)->finished);
}

TEST_CASE("dispatcher_state: tasks lost before any split was leased leave the iteration waiting",
          "[dispatcher]") {
  DispatcherState state = LeasingState();
  ApplyAll(state, {RemoveWorker("w1")});
  CHECK_FALSE(state.FindIteration(1)->finished);
  ApplyAll(state, {RemoveWorker("w2")});
  // Nothing to return, but the split provider has not run out.
  CHECK(state.FindIteration(1)->returned_splits.empty());
  CHECK(state.HasUnreadSplits(*state.FindIteration(1)));
  CHECK_FALSE(state.FindIteration(1)->finished);
  // A dispatcher from before this rule counted it finished and may have
  // journaled its job's removal: that record still applies.
  proto::Update remove;
  remove.mutable_remove_job()->set_job_id(1);
  REQUIRE(state.Apply(remove).ok());
  CHECK(state.FindIteration(1) == nullptr);
  CHECK(state.FindJob(1) == nullptr);
}

TEST_CASE("dispatcher_state: a task a client read to its end is over when its worker goes before saying so",
          "[dispatcher]") {
  DispatcherState state = LeasingState();
  proto::Update complete;
  complete.mutable_complete_task()->set_task_id(1);
  ApplyAll(state, {Lease(1, 1, {{1, 0, 10}}), complete, FinishTask(2)});
  CHECK_FALSE(state.FindIteration(1)->finished);
  // w1 dies before its FinishTask for task 1 arrives: the task is over,
  // not lost, and its delivered split does not return.
  ApplyAll(state, {RemoveWorker("w1")});
  CHECK(state.FindTask(1)->finished);
  CHECK_FALSE(state.FindTask(1)->lost);
  CHECK(state.FindIteration(1)->returned_splits.empty());
  CHECK(state.FindIteration(1)->finished);
}

proto::Update LoseTask(int64_t task_id, const std::string& reason) {
  proto::Update update;
  update.mutable_lose_task()->set_task_id(task_id);
  update.mutable_lose_task()->set_reason(reason);
  return update;
}

TEST_CASE("dispatcher_state: LoseTask ends one task as lost and leaves its worker and other tasks",
          "[dispatcher]") {
  DispatcherState state = LeasingState();
  // A second iteration (another job) with a task on w1 too.
  ApplyAll(state, {CreateJob(2, "d"), CreateIteration(2, 2, 0), CreateTask(3, 2, "w1"),
                   Lease(1, 1, {{1, 0, 10}, {2, 10, 20}}), Lease(2, 1, {{3, 20, 30}})});
  ApplyAll(state, {LoseTask(1, "unreachable from clients for 300 ms")});
  const DispatcherState::Task* lost = state.FindTask(1);
  CHECK(lost->finished);
  CHECK(lost->lost);
  CHECK(lost->lost_reason == "unreachable from clients for 300 ms");
  CHECK(lost->leases.empty());
  CHECK(Seqs(state.FindIteration(1)->returned_splits) == std::vector<int64_t>{1, 2});
  CHECK(state.FindWorker("w1") != nullptr);
  CHECK_FALSE(state.FindTask(3)->finished);
  CHECK_FALSE(state.FindTask(3)->lost);
  CHECK_FALSE(state.FindTask(2)->finished);
  CHECK(Seqs(state.FindTask(2)->leases) == std::vector<int64_t>{3});
  CHECK_FALSE(state.FindIteration(1)->finished);

  // Refused, changing nothing: a task already lost, one read to its end,
  // an unknown one.
  proto::Update complete;
  complete.mutable_complete_task()->set_task_id(2);
  ApplyAll(state, {complete});
  const proto::StateSnapshot before = state.ToSnapshot();
  CHECK(state.Apply(LoseTask(1, "again")) == absl::FailedPreconditionError("cannot lose task 1"));
  CHECK(state.Apply(LoseTask(2, "x")) == absl::FailedPreconditionError("cannot lose task 2"));
  CHECK(state.Apply(LoseTask(9, "x")) == absl::FailedPreconditionError("cannot lose task 9"));
  CHECK(state.ToSnapshot().SerializeAsString() == before.SerializeAsString());

  // A task its worker finished but its readers never got to the end of is
  // lost too: its splits return.
  ApplyAll(state, {CreateTask(4, 1, "w2"), Lease(4, 1, {{1, 0, 10}}), FinishTask(4), LoseTask(4, "gone")});
  CHECK(state.FindTask(4)->lost);
  CHECK(state.FindTask(4)->lost_reason == "gone");
  CHECK(Seqs(state.FindIteration(1)->returned_splits) == std::vector<int64_t>{1, 2});

  // The snapshot keeps it all.
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(state.ToSnapshot());
  REQUIRE(restored.ok());
  CHECK(restored->ToSnapshot().SerializeAsString() == state.ToSnapshot().SerializeAsString());
  CHECK(restored->FindTask(1)->lost);
  CHECK(restored->FindTask(1)->lost_reason == "unreachable from clients for 300 ms");
}

TEST_CASE("dispatcher_state: a job whose iteration still runs a task is not removed", "[dispatcher]") {
  DispatcherState state = LeasingState();
  ApplyAll(state, {RemoveWorker("w1")});
  proto::Update remove;
  remove.mutable_remove_job()->set_job_id(1);
  const absl::Status status = state.Apply(remove);
  CHECK(absl::IsFailedPrecondition(status));
  CHECK(status.message() == "job 1 still has iteration 1 running or read");
  CHECK(state.FindJob(1) != nullptr);
}

TEST_CASE("dispatcher_state: splits leased in runs are completed, returned and re-leased in part",
          "[dispatcher]") {
  DispatcherState state = LeasingState();
  // Task 1 leases splits 1-5 of 10 positions (the last one 6), task 2
  // splits 6-7, as two runs.
  ApplyAll(state, {LeaseRuns(1, 1, {Split{0, 46, 1, 5, 10}}), LeaseRuns(2, 1, {Split{46, 66, 6, 2, 10}})});
  CHECK(state.FindIteration(1)->next_split_seq == 8);
  CHECK(state.FindTask(1)->last_split_response == std::vector<Split>{{0, 46, 1, 5, 10}});
  CHECK(CountSplits(state.FindTask(1)->leases) == 5);

  // exactly_once reports splits 2 and 5 delivered: the run falls in three.
  proto::Update complete;
  complete.mutable_complete_splits()->set_iteration_id(1);
  complete.mutable_complete_splits()->add_seqs(2);
  complete.mutable_complete_splits()->add_seqs(5);
  ApplyAll(state, {complete});
  CHECK(Runs(state.FindTask(1)->leases) == std::vector<Split>{{0, 10, 1}, {20, 40, 3, 2, 10}});

  // Its worker is lost: what is left returns, runs kept.
  ApplyAll(state, {RemoveWorker("w1")});
  CHECK(Seqs(state.FindIteration(1)->returned_splits) == std::vector<int64_t>{1, 3, 4});
  CHECK(CountSplits(state.FindIteration(1)->returned_splits) == 3);

  // A new task takes split 3 alone (a part of a returned run), then 1, 4
  // and new ones.
  ApplyAll(state, {CreateTask(3, 1, "w2"), LeaseRuns(3, 1, {Split{20, 30, 3}})});
  CHECK(Runs(state.FindIteration(1)->returned_splits) == std::vector<Split>{{0, 10, 1}, {30, 40, 4}});
  absl::Status overlapping = state.Apply(LeaseRuns(3, 2, {Split{20, 40, 3, 2, 10}}));
  CHECK(overlapping.message() == "splits 3 to 4 of iteration 1 are neither new nor returned");
  ApplyAll(state, {LeaseRuns(3, 2, {Split{0, 10, 1}, Split{30, 40, 4}, Split{66, 96, 8, 3, 10}})});
  CHECK(state.FindIteration(1)->returned_splits.empty());
  CHECK(state.FindIteration(1)->next_split_seq == 11);
  CHECK(Seqs(state.FindTask(3)->leases) == std::vector<int64_t>{1, 3, 4, 8, 9, 10});

  // Runs survive a snapshot.
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(state.ToSnapshot());
  REQUIRE(restored.ok());
  CHECK(Runs(restored->FindTask(3)->leases) == Runs(state.FindTask(3)->leases));
  CHECK(restored->FindTask(3)->last_split_response == state.FindTask(3)->last_split_response);
}

TEST_CASE(
    "dispatcher_state: a restored iteration's skipped splits count as handed out, and survive a snapshot",
    "[dispatcher][checkpoint]") {
  DispatcherState state;
  proto::Update create = CreateIteration(1, 1, 0);
  for (int64_t seq : {1, 3, 5, 6}) create.mutable_create_iteration()->add_skip_splits(seq);
  ApplyAll(state, {RegisterDataset("d", "f", 100), RegisterWorker("w1"),
                   CreateJob(1, "d", "", proto::DISTRIBUTED_EPOCH), create, CreateTask(1, 1, "w1")});
  const IntRanges skipped{{1, 3}, {5, 6}};
  CHECK(state.FindIteration(1)->skip_splits == skipped);
  // Split 3 comes after the skipped 1 and 2; split 2 is neither new nor
  // returned.
  CHECK(state.Apply(LeaseRuns(1, 1, {Split{10, 20, 2}})).message() ==
        "split 2 of iteration 1 is neither new nor returned");
  proto::Update lease = LeaseRuns(1, 1, {Split{20, 40, 3, 2, 10}});
  lease.mutable_lease_splits()->set_next_split_seq(6);  // 5 went by, skipped
  ApplyAll(state, {lease});
  CHECK(state.FindIteration(1)->next_split_seq == 6);
  CHECK(Seqs(state.FindTask(1)->leases) == std::vector<int64_t>{3, 4});
  proto::Update past = LeaseRuns(1, 2, {});
  past.mutable_lease_splits()->set_next_split_seq(8);  // 6 and 7 are not skipped
  CHECK(state.Apply(past).message() ==
        "a lease of iteration 1 moves the next split to 8 from 6 past splits not skipped");
  // Its worker lost, splits 3 and 4 return, and go out again as returned
  // splits, not new ones.
  ApplyAll(state, {RegisterWorker("w2"), CreateTask(2, 1, "w2"), RemoveWorker("w1")});
  CHECK(Seqs(state.FindIteration(1)->returned_splits) == std::vector<int64_t>{3, 4});
  ApplyAll(state, {LeaseRuns(2, 1, {Split{20, 40, 3, 2, 10}})});
  CHECK(state.FindIteration(1)->returned_splits.empty());
  CHECK(state.FindIteration(1)->next_split_seq == 6);
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(state.ToSnapshot());
  REQUIRE(restored.ok());
  CHECK(restored->FindIteration(1)->skip_splits == skipped);

  proto::Update overlapping = CreateIteration(2, 1, 1);
  for (int64_t seq : {4, 6, 5, 7}) overlapping.mutable_create_iteration()->add_skip_splits(seq);
  CHECK(state.Apply(overlapping).message() ==
        "skip_splits has [5, 7): empty, below 1, or not after the range before");
  CHECK(state.FindIteration(2) == nullptr);
}

TEST_CASE("dispatcher_state: split runs split and join exactly", "[dispatcher]") {
  SplitRuns runs;
  runs[1] = Split{0, 46, 1, 5, 10};
  runs[9] = Split{100, 110, 9};
  CHECK_FALSE(RemoveSplits(&runs, 5, 2));  // 5 and 6: past the run's end
  CHECK_FALSE(RemoveSplits(&runs, 7, 1));  // in no run
  CHECK_FALSE(RemoveSplits(&runs, 0, 1));
  CHECK(RemoveSplits(&runs, 1, 2));
  CHECK(Runs(runs) == std::vector<Split>{{20, 46, 3, 3, 10}, {100, 110, 9}});
  CHECK(RemoveSplits(&runs, 5, 1));
  CHECK(Runs(runs) == std::vector<Split>{{20, 40, 3, 2, 10}, {100, 110, 9}});
  CHECK(RemoveSplits(&runs, 9, 1));
  CHECK(CountSplits(runs) == 2);

  // An old journal's lease (no count) is one split.
  proto::SplitLease old_lease;
  old_lease.set_seq(4);
  old_lease.set_begin(7);
  old_lease.set_end(9);
  CHECK(SplitFromMessage(old_lease) == Split{7, 9, 4});
  // A single split is written without count; a run with it, and both read back.
  proto::SplitLease single;
  SplitToMessage(Split{7, 9, 4}, &single);
  CHECK(single.SerializeAsString() == old_lease.SerializeAsString());
  proto::SplitLease run;
  SplitToMessage(Split{0, 46, 1, 5, 10}, &run);
  CHECK(run.count() == 5);
  CHECK(run.split_size() == 10);
  CHECK(SplitFromMessage(run) == Split{0, 46, 1, 5, 10});
}

TEST_CASE("dispatcher_state: a lease of an unknown split or to a finished task is refused", "[dispatcher]") {
  DispatcherState state = LeasingState();
  absl::Status skipped = state.Apply(Lease(1, 1, {{2, 0, 10}}));
  CHECK(skipped.message() == "split 2 of iteration 1 is neither new nor returned");
  ApplyAll(state, {FinishTask(1)});
  absl::Status finished = state.Apply(Lease(1, 1, {{1, 0, 10}}));
  CHECK(finished.message() == "cannot lease splits to task 1");
  CHECK(state.FindIteration(1)->next_split_seq == 1);
}

TEST_CASE("dispatcher_state: delivered splits are never returned", "[dispatcher]") {
  DispatcherState state = LeasingState();
  ApplyAll(state, {Lease(1, 1, {{1, 0, 10}, {2, 10, 20}}), Lease(2, 1, {{3, 20, 30}})});
  proto::Update complete;
  complete.mutable_complete_splits()->set_iteration_id(1);
  complete.mutable_complete_splits()->add_seqs(2);
  proto::Update complete_task;
  complete_task.mutable_complete_task()->set_task_id(2);
  ApplyAll(state, {complete, complete_task, FinishTask(2)});
  CHECK(state.FindTask(2)->completed);
  // A finished task that a client has read to its end loses nothing when
  // its worker goes; one not yet read returns its splits.
  ApplyAll(state, {RemoveWorker("w2"), RemoveWorker("w1")});
  CHECK(Seqs(state.FindIteration(1)->returned_splits) == std::vector<int64_t>{1});
  CHECK(state.FindTask(2)->finished);
  CHECK_FALSE(state.FindTask(2)->lost);
}

TEST_CASE("dispatcher_state: a snapshot restores the same state", "[dispatcher]") {
  DispatcherState state = LeasingState();
  ApplyAll(state, {Lease(1, 1, {{1, 0, 10}, {2, 10, 20}}), Lease(2, 1, {{3, 20, 30}}), Acquire(7, 1),
                   RemoveWorker("w1"), FinishTask(2), RegisterDataset("e", "g", 5),
                   CreateJob(2, "e", "named"), CreateIteration(2, 2, 0), CreateTask(3, 2, "w2")});
  proto::Update restore = CreateIteration(3, 2, 1);
  restore.mutable_create_iteration()->set_restored_from_job(41);
  ApplyAll(state, {restore});
  proto::Update collect;
  collect.mutable_garbage_collect_iteration()->set_iteration_id(2);
  ApplyAll(state, {collect});
  const proto::StateSnapshot snapshot = state.ToSnapshot();
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(snapshot);
  REQUIRE(restored.ok());
  CHECK(restored->ToSnapshot().SerializeAsString() == snapshot.SerializeAsString());
  CHECK(Seqs(restored->FindIteration(1)->returned_splits) == std::vector<int64_t>{1, 2});
  CHECK_FALSE(restored->FindIteration(1)->finished);
  CHECK(restored->FindIteration(2)->finished);
  CHECK(restored->FindIteration(2)->collected);
  CHECK(restored->FindIteration(3)->restored_from_job == 41);
  CHECK(restored->FindIteration(2)->restored_from_job == 0);
  CHECK(restored->FindJobByName("named")->id == 2);
  CHECK(restored->FindDatasetByFingerprint("g")->id == "e");
  CHECK(restored->IterationOfClient(7) == std::optional<int64_t>(1));
  CHECK(restored->NextTaskId() == 4);
  CHECK(restored->FindTask(1)->lost);
  // Ids go on where they stood.
  CHECK(restored->NextIterationClientId() == 8);
  CHECK(restored->NextJobId() == 3);
}

TEST_CASE("dispatcher_state: a snapshot that contradicts itself is DataLoss", "[dispatcher]") {
  proto::StateSnapshot snapshot = LeasingState().ToSnapshot();
  snapshot.mutable_iterations(0)->add_tasks(99);
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(snapshot);
  REQUIRE(absl::IsDataLoss(restored.status()));
  CHECK(restored.status().message() == "snapshot: iteration 1 has no task 99");
}

}  // namespace

}  // namespace sluice::dispatcher
