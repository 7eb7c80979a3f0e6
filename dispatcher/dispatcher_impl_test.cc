#include "dispatcher/dispatcher_impl.h"

#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "pipeline/builder.h"
#include "tests/testing/dispatcher_test_util.h"

namespace sluice::dispatcher {
namespace {

constexpr char kMismatch[] =
    "protocol version mismatch: the peer speaks version 6, this server speaks 5; run the same Sluice release "
    "on both";

TEST_CASE("dispatcher_impl: GetVersion reports the protocol and server versions", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  proto::GetVersionResponse response;
  REQUIRE(d.GetVersion(proto::GetVersionRequest(), &response).ok());
  CHECK(response.protocol_version() == 5);
  CHECK(response.server_version() == "sluice 0.1.0");
}

TEST_CASE("dispatcher_impl: the same definition registers once", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  CHECK(Register(d, SquaresDef()) == "1000");
  CHECK(Register(d, SquaresDef()) == "1000");
  // Built separately, the same steps give the same definition.
  CHECK(Register(d, internal::DefinitionOf(Dataset::Range(10).Map("square"))) == "1000");
  CHECK(Register(d, internal::DefinitionOf(Dataset::Range(11).Map("square"))) == "1001");
  CHECK(Register(d, SquaresDef()) == "1000");
  proto::StatusSnapshot snapshot = Snapshot(d);
  REQUIRE(snapshot.datasets_size() == 2);
  CHECK(snapshot.datasets(0).dataset_id() == "1000");
  CHECK(snapshot.datasets(0).fingerprint() == DatasetFingerprint(SquaresDef()));
  CHECK(snapshot.datasets(1).dataset_id() == "1001");
  CHECK(snapshot.datasets(1).fingerprint() ==
        DatasetFingerprint(internal::DefinitionOf(Dataset::Range(11).Map("square"))));
}

TEST_CASE("dispatcher_impl: an explicit dataset id", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  CHECK(Register(d, SquaresDef(), "mine") == "mine");
  // Same id, same definition: the same dataset.
  CHECK(Register(d, SquaresDef(), "mine") == "mine");
  // Same id, another definition: refused.
  absl::Status status = TryRegister(d, internal::DefinitionOf(Dataset::Range(5)), "mine");
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "dataset id 'mine' is already registered with a different definition");
  // Without an id, the fingerprint finds the named dataset.
  CHECK(Register(d, SquaresDef()) == "mine");
  // Numbered ids continue from 1000.
  CHECK(Register(d, internal::DefinitionOf(Dataset::Range(5))) == "1000");
  CHECK(Snapshot(d).datasets_size() == 2);
}

TEST_CASE("dispatcher_impl: a definition that cannot be built is refused", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  absl::Status status = TryRegister(d, internal::DefinitionOf(Dataset::Range(10).Batch(0)));
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "step 2 (batch): batch_size must be > 0, got 0");
  absl::Status empty = TryRegister(d, proto::DatasetDef());
  CHECK(empty.code() == absl::StatusCode::kInvalidArgument);
  CHECK(empty.message() == "the pipeline has no steps");
  CHECK(Snapshot(d).datasets_size() == 0);
  // Nothing was taken: the next good one is still 1000.
  CHECK(Register(d, SquaresDef()) == "1000");
}

TEST_CASE("dispatcher_impl: GetDatasetInfo gives the element spec and cardinality", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  const std::string squares = Register(d, SquaresDef());
  const std::string batched = Register(d, internal::DefinitionOf(Dataset::Range(10).Batch(4)));
  const std::string dropped = Register(
      d, internal::DefinitionOf(Dataset::Range(10).Batch(4, {.drop_remainder = /*drop_remainder=*/true})));

  auto info = [&](const std::string& id) {
    proto::GetDatasetInfoRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_dataset_id(id);
    proto::GetDatasetInfoResponse response;
    absl::Status status = d.GetDatasetInfo(request, &response);
    INFO(status.ToString());
    REQUIRE(status.ok());
    return response;
  };

  proto::GetDatasetInfoResponse s = info(squares);
  REQUIRE(s.element_spec().components_size() == 1);
  CHECK(s.element_spec().components(0).dtype() == proto::DT_INT64);
  CHECK(s.element_spec().components(0).shape().dims_size() == 0);
  CHECK_FALSE(s.element_spec().components(0).shape().unknown_rank());
  CHECK(s.cardinality() == 10);

  proto::GetDatasetInfoResponse b = info(batched);
  REQUIRE(b.element_spec().components_size() == 1);
  CHECK(b.element_spec().components(0).dtype() == proto::DT_INT64);
  CHECK(std::vector<int64_t>(b.element_spec().components(0).shape().dims().begin(),
                             b.element_spec().components(0).shape().dims().end()) ==
        std::vector<int64_t>{-1});
  CHECK(b.cardinality() == 3);

  proto::GetDatasetInfoResponse r = info(dropped);
  REQUIRE(r.element_spec().components_size() == 1);
  CHECK(std::vector<int64_t>(r.element_spec().components(0).shape().dims().begin(),
                             r.element_spec().components(0).shape().dims().end()) == std::vector<int64_t>{4});
  CHECK(r.cardinality() == 2);

  proto::GetDatasetInfoRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_dataset_id("nope");
  proto::GetDatasetInfoResponse response;
  absl::Status status = d.GetDatasetInfo(request, &response);
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK(status.message() == "unknown dataset id 'nope'");
}

TEST_CASE("dispatcher_impl: named jobs are shared, anonymous jobs are not", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  const std::string id = Register(d, SquaresDef());
  const int64_t shared = Job(d, id, proto::PARALLEL_EPOCHS, "shared");
  CHECK(shared == 1);
  CHECK(Job(d, id, proto::PARALLEL_EPOCHS, "shared") == 1);
  CHECK(Job(d, id) == 2);
  CHECK(Job(d, id) == 3);
  CHECK(Job(d, id, proto::PARALLEL_EPOCHS, "other") == 4);
  CHECK(Job(d, id, proto::PARALLEL_EPOCHS, "shared") == 1);
  proto::StatusSnapshot snapshot = Snapshot(d);
  REQUIRE(snapshot.jobs_size() == 4);
  CHECK(snapshot.jobs(0).job_id() == 1);
  CHECK(snapshot.jobs(0).params().job_name() == "shared");
  CHECK(snapshot.jobs(0).params().dataset_id() == id);
  CHECK(snapshot.jobs(0).params().processing_mode() == proto::PARALLEL_EPOCHS);
}

TEST_CASE("dispatcher_impl: a named job asked for with other params is refused", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  const std::string id = Register(d, SquaresDef());
  const std::string other = Register(d, internal::DefinitionOf(Dataset::Range(20)));
  REQUIRE(Job(d, id, proto::PARALLEL_EPOCHS, "shared") == 1);

  absl::Status mode = TryJob(d, id, proto::DISTRIBUTED_EPOCH, "shared");
  CHECK(mode.code() == absl::StatusCode::kInvalidArgument);
  CHECK(mode.message() ==
        "job 'shared' already exists for dataset 1000 in parallel_epochs mode; asked for dataset 1000 in "
        "distributed_epoch mode");

  absl::Status dataset = TryJob(d, other, proto::PARALLEL_EPOCHS, "shared");
  CHECK(dataset.code() == absl::StatusCode::kInvalidArgument);
  CHECK(dataset.message() ==
        "job 'shared' already exists for dataset 1000 in parallel_epochs mode; asked for dataset 1001 in "
        "parallel_epochs mode");
  CHECK(Snapshot(d).jobs_size() == 1);
}

TEST_CASE("dispatcher_impl: GetOrCreateJob errors", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  const std::string id = Register(d, SquaresDef());

  absl::Status unset = TryJob(d, id, proto::PROCESSING_MODE_UNSET, "");
  CHECK(unset.code() == absl::StatusCode::kInvalidArgument);
  CHECK(unset.message() == "job: processing_mode is not set");

  absl::Status unknown = TryJob(d, "77", proto::PARALLEL_EPOCHS, "");
  CHECK(unknown.code() == absl::StatusCode::kNotFound);
  CHECK(unknown.message() == "unknown dataset id '77'");

  const std::string zipped =
      Register(d, internal::DefinitionOf(Dataset::Zip({Dataset::Range(3), Dataset::Range(3)})));
  absl::Status zip = TryJob(d, zipped, proto::DISTRIBUTED_EPOCH, "z");
  CHECK(zip.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(zip.message() ==
        "a pipeline whose source is 'zip' cannot be split for distributed_epoch; start it with range, "
        "from_tensor_slices, list_files, image_folder, webdataset, text_line, json_lines, tfrecord or "
        "fixed_length_record");
  // The same pipeline is fine in parallel_epochs.
  CHECK(Job(d, zipped, proto::PARALLEL_EPOCHS) == 1);
  CHECK(Snapshot(d).jobs_size() == 1);
}

TEST_CASE("dispatcher_impl: new tasks are pushed to their workers once, when created", "[dispatcher]") {
  std::vector<std::pair<std::string, proto::TaskDef>> pushed;
  DispatcherImpl d(TestConfig(), [&](const std::string& address, const proto::TaskDef& task) {
    pushed.emplace_back(address, task);
  });
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const int64_t job = Job(d, Register(d, SquaresDef()), proto::PARALLEL_EPOCHS, "shared");
  const auto it = Iteration(d, job);
  REQUIRE(pushed.size() == 2);
  CHECK(pushed[0].first == "w1:1");
  CHECK(pushed[1].first == "w2:2");
  for (int i = 0; i < 2; ++i) {
    CHECK(pushed[i].second.task_id() == i + 1);
    CHECK(pushed[i].second.iteration_id() == it.iteration_id());
    CHECK(pushed[i].second.processing_mode() == proto::PARALLEL_EPOCHS);
    CHECK(pushed[i].second.dataset().SerializeAsString() == SquaresDef().SerializeAsString());
  }
  // A second consumer of the same iteration creates no tasks, so no push.
  Iteration(d, job);
  CHECK(pushed.size() == 2);
  // A worker registering later gets its task in its heartbeat's reply.
  CHECK(Heartbeat(d, "w3:3").new_tasks_size() == 1);
  CHECK(pushed.size() == 2);
}

TEST_CASE("dispatcher_impl: WorkerHeartbeat registers the worker and hands out tasks", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  proto::WorkerHeartbeatResponse first = Heartbeat(d, "w1:1", {}, {"gpu"});
  CHECK(first.new_tasks_size() == 0);
  CHECK(first.tasks_to_delete_size() == 0);
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});

  const std::string id = Register(d, SquaresDef());
  const int64_t job = Job(d, id, proto::DISTRIBUTED_EPOCH);
  const auto it = Iteration(d, job);

  // The registered worker got a task when the iteration was made.
  proto::WorkerHeartbeatResponse second = Heartbeat(d, "w1:1");
  REQUIRE(second.new_tasks_size() == 1);
  const proto::TaskDef& task = second.new_tasks(0);
  CHECK(task.task_id() == 1);
  CHECK(task.iteration_id() == it.iteration_id());
  CHECK(task.processing_mode() == proto::DISTRIBUTED_EPOCH);
  CHECK(task.dataset().SerializeAsString() == SquaresDef().SerializeAsString());

  // A task the worker already runs is not sent again.
  CHECK(Heartbeat(d, "w1:1", {1}).new_tasks_size() == 0);

  // A worker that registers later joins the unfinished iteration.
  proto::WorkerHeartbeatResponse late = Heartbeat(d, "w2:2");
  REQUIRE(late.new_tasks_size() == 1);
  CHECK(late.new_tasks(0).task_id() == 2);
  CHECK(late.new_tasks(0).iteration_id() == it.iteration_id());
  CHECK(late.new_tasks(0).processing_mode() == proto::DISTRIBUTED_EPOCH);
  CHECK(late.new_tasks(0).dataset().SerializeAsString() == SquaresDef().SerializeAsString());

  // Tasks the dispatcher does not know (or gave to another worker) are
  // to be deleted.
  proto::WorkerHeartbeatResponse stale = Heartbeat(d, "w1:1", {1, 2, 99});
  CHECK(stale.new_tasks_size() == 0);
  CHECK(std::vector<int64_t>(stale.tasks_to_delete().begin(), stale.tasks_to_delete().end()) ==
        std::vector<int64_t>{2, 99});

  proto::GetWorkersRequest request;
  *request.mutable_version() = CurrentVersion();
  proto::GetWorkersResponse workers;
  REQUIRE(d.GetWorkers(request, &workers).ok());
  REQUIRE(workers.workers_size() == 2);
  CHECK(workers.workers(0).address() == "w1:1");
  CHECK(std::vector<std::string>(workers.workers(0).tags().begin(), workers.workers(0).tags().end()) ==
        std::vector<std::string>{"gpu"});
  CHECK(std::vector<int64_t>(workers.workers(0).tasks().begin(), workers.workers(0).tasks().end()) ==
        std::vector<int64_t>{1});
  CHECK(workers.workers(0).last_heartbeat_unix_ms() > 0);
  CHECK(workers.workers(1).address() == "w2:2");
  CHECK(workers.workers(1).tags_size() == 0);
}

TEST_CASE("dispatcher_impl: a heartbeat without an address is refused", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  proto::WorkerHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  proto::WorkerHeartbeatResponse response;
  absl::Status status = d.WorkerHeartbeat(request, &response);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "worker heartbeat without an address");
  CHECK(WorkerAddresses(d).empty());
}

TEST_CASE("dispatcher_impl: a late worker does not join finished iterations", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  const int64_t job = Job(d, Register(d, SquaresDef()));
  const auto first = Iteration(d, job, 0);
  Finish(d, "w1:1", {1});
  const auto second = Iteration(d, job, 1);
  proto::WorkerHeartbeatResponse late = Heartbeat(d, "w2:2");
  REQUIRE(late.new_tasks_size() == 1);
  CHECK(late.new_tasks(0).iteration_id() == second.iteration_id());
  CHECK(late.new_tasks(0).iteration_id() != first.iteration_id());
  CHECK(late.new_tasks(0).processing_mode() == proto::PARALLEL_EPOCHS);
}

TEST_CASE("dispatcher_impl: GetOrCreateIteration makes one task per worker and a client per call",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const int64_t job = Job(d, Register(d, SquaresDef()), proto::PARALLEL_EPOCHS, "shared");

  const auto a = Iteration(d, job, 0);
  const auto b = Iteration(d, job, 0);
  CHECK(a.iteration_id() == 1);
  CHECK(b.iteration_id() == 1);
  CHECK(a.iteration_client_id() == 1);
  CHECK(b.iteration_client_id() == 2);
  const auto c = Iteration(d, job, 1);
  CHECK(c.iteration_id() == 2);
  CHECK(c.iteration_client_id() == 3);

  proto::StatusSnapshot snapshot = Snapshot(d);
  REQUIRE(snapshot.iterations_size() == 2);
  CHECK(snapshot.iterations(0).iteration_id() == 1);
  CHECK(snapshot.iterations(0).job_id() == job);
  CHECK(snapshot.iterations(0).repetition() == 0);
  CHECK(snapshot.iterations(0).num_clients() == 2);
  CHECK_FALSE(snapshot.iterations(0).finished());
  CHECK(snapshot.iterations(1).repetition() == 1);
  CHECK(snapshot.iterations(1).num_clients() == 1);
  REQUIRE(snapshot.tasks_size() == 4);
  Listing tasks;
  for (const auto& t : snapshot.tasks()) tasks.emplace_back(t.iteration_id(), t.worker_address());
  CHECK(tasks == Listing{{1, "w1:1"}, {1, "w2:2"}, {2, "w1:1"}, {2, "w2:2"}});

  // The same job by name, from another client, shares the iteration.
  const int64_t again = Job(d, Register(d, SquaresDef()), proto::PARALLEL_EPOCHS, "shared");
  CHECK(again == job);
  CHECK(Iteration(d, again, 0).iteration_id() == 1);
}

TEST_CASE("dispatcher_impl: GetOrCreateIteration errors", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  const int64_t job = Job(d, Register(d, SquaresDef()));
  proto::GetOrCreateIterationRequest request;
  *request.mutable_version() = CurrentVersion();
  proto::GetOrCreateIterationResponse response;

  request.set_job_id(42);
  absl::Status unknown = d.GetOrCreateIteration(request, &response);
  CHECK(unknown.code() == absl::StatusCode::kNotFound);
  CHECK(unknown.message() == "unknown job 42");

  request.set_job_id(job);
  request.set_repetition(-1);
  absl::Status negative = d.GetOrCreateIteration(request, &response);
  CHECK(negative.code() == absl::StatusCode::kInvalidArgument);
  CHECK(negative.message() ==
        "GetOrCreateIteration: repetition must be in [0, 2^40 = 1099511627776], got -1");
  CHECK(Snapshot(d).iterations_size() == 0);
}

TEST_CASE("dispatcher_impl: ClientHeartbeat lists tasks until the iteration finishes", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));

  proto::ClientHeartbeatResponse before = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(before) == Listing{{1, "w1:1"}, {2, "w2:2"}});
  for (const auto& t : before.tasks()) CHECK(t.iteration_id() == it.iteration_id());
  CHECK_FALSE(before.iteration_finished());

  Finish(d, "w1:1", {1});
  proto::ClientHeartbeatResponse half = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(half) == Listing{{1, "w1:1"}, {2, "w2:2"}});
  CHECK_FALSE(half.iteration_finished());

  // Unknown and repeated task ids are ignored.
  Finish(d, "w2:2", {2, 2, 99});
  proto::ClientHeartbeatResponse after = ClientBeat(d, it.iteration_client_id());
  // Finished tasks stay listed: the client still drains them.
  CHECK(Listed(after) == Listing{{1, "w1:1"}, {2, "w2:2"}});
  CHECK(after.iteration_finished());
  CHECK(Snapshot(d).iterations(0).finished());
  // Finished tasks are not handed to workers again.
  CHECK(Heartbeat(d, "w1:1").new_tasks_size() == 0);
}

TEST_CASE("dispatcher_impl: an iteration without workers is not finished", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  proto::ClientHeartbeatResponse response = ClientBeat(d, it.iteration_client_id());
  CHECK(response.tasks_size() == 0);
  CHECK_FALSE(response.iteration_finished());
  // A worker arriving now gets the task.
  CHECK(NewTaskIds(Heartbeat(d, "w1:1")) == std::vector<int64_t>{1});
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{1, "w1:1"}});
}

TEST_CASE("dispatcher_impl: released clients are unknown, releasing again is fine", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  proto::ReleaseIterationClientRequest release;
  *release.mutable_version() = CurrentVersion();
  release.set_iteration_client_id(it.iteration_client_id());
  release.set_client_secret(it.client_secret());
  proto::ReleaseIterationClientResponse released;
  CHECK(it.client_secret().size() == 32);
  proto::ReleaseIterationClientRequest forged = release;
  forged.set_client_secret(std::string(32, '0'));
  absl::Status wrong = d.ReleaseIterationClient(forged, &released);
  CHECK(wrong.code() == absl::StatusCode::kPermissionDenied);
  CHECK(
      std::string(wrong.message()) ==
      "ReleaseIterationClient: iteration client 1 was not created by this caller: client_secret is wrong (a "
      "client may act only in its own name)");
  forged.clear_client_secret();
  CHECK(std::string(d.ReleaseIterationClient(forged, &released).message()) ==
        "ReleaseIterationClient: iteration client 1 was not created by this caller: client_secret is missing "
        "(a "
        "client may act only in its own name)");
  CHECK(Snapshot(d).iterations(0).num_clients() == 1);
  CHECK(d.ReleaseIterationClient(release, &released).ok());
  CHECK(d.ReleaseIterationClient(release, &released).ok());
  CHECK(Snapshot(d).iterations(0).num_clients() == 0);

  proto::ClientHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_client_id(it.iteration_client_id());
  request.set_client_secret(d.ClientSecretOf(request.iteration_client_id()));
  proto::ClientHeartbeatResponse response;
  absl::Status status = d.ClientHeartbeat(request, &response);
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK(status.message() == "unknown iteration client 1 (never given out, or already released)");

  request.set_iteration_client_id(99);
  request.set_client_secret(d.ClientSecretOf(request.iteration_client_id()));
  absl::Status unknown = d.ClientHeartbeat(request, &response);
  CHECK(unknown.code() == absl::StatusCode::kNotFound);
  CHECK(unknown.message() == "unknown iteration client 99 (never given out, or already released)");
}

TEST_CASE("dispatcher_impl: a version mismatch is FailedPrecondition", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  proto::VersionInfo wrong;
  wrong.set_protocol_version(6);
  auto check = [](const absl::Status& status) {
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(status.message() == kMismatch);
  };
  {
    proto::GetOrRegisterDatasetRequest r;
    *r.mutable_version() = wrong;
    *r.mutable_dataset() = SquaresDef();
    proto::GetOrRegisterDatasetResponse out;
    check(d.GetOrRegisterDataset(r, &out));
  }
  {
    proto::GetDatasetInfoRequest r;
    *r.mutable_version() = wrong;
    proto::GetDatasetInfoResponse out;
    check(d.GetDatasetInfo(r, &out));
  }
  {
    proto::GetOrCreateJobRequest r;
    *r.mutable_version() = wrong;
    proto::GetOrCreateJobResponse out;
    check(d.GetOrCreateJob(r, &out));
  }
  {
    proto::GetOrCreateIterationRequest r;
    *r.mutable_version() = wrong;
    proto::GetOrCreateIterationResponse out;
    check(d.GetOrCreateIteration(r, &out));
  }
  {
    proto::ClientHeartbeatRequest r;
    *r.mutable_version() = wrong;
    proto::ClientHeartbeatResponse out;
    check(d.ClientHeartbeat(r, &out));
  }
  {
    proto::ReleaseIterationClientRequest r;
    *r.mutable_version() = wrong;
    proto::ReleaseIterationClientResponse out;
    check(d.ReleaseIterationClient(r, &out));
  }
  {
    proto::WorkerHeartbeatRequest r;
    *r.mutable_version() = wrong;
    r.set_worker_address("w1:1");
    proto::WorkerHeartbeatResponse out;
    check(d.WorkerHeartbeat(r, &out));
  }
  {
    proto::WorkerUpdatesRequest r;
    *r.mutable_version() = wrong;
    proto::WorkerUpdatesResponse out;
    check(d.WorkerUpdates(r, &out));
  }
  {
    proto::WorkerShutdownRequest r;
    *r.mutable_version() = wrong;
    proto::WorkerShutdownResponse out;
    check(d.WorkerShutdown(r, &out));
  }
  {
    proto::GetSplitsRequest r;
    *r.mutable_version() = wrong;
    proto::GetSplitsResponse out;
    check(d.GetSplits(r, &out));
  }
  {
    proto::GetWorkersRequest r;
    *r.mutable_version() = wrong;
    proto::GetWorkersResponse out;
    check(d.GetWorkers(r, &out));
  }
  {
    proto::GetStatusRequest r;
    *r.mutable_version() = wrong;
    proto::StatusSnapshot out;
    check(d.GetStatus(r, &out));
  }
  // Nothing was registered by the refused calls.
  proto::StatusSnapshot snapshot = Snapshot(d);
  CHECK(snapshot.datasets_size() == 0);
  CHECK(snapshot.workers_size() == 0);

  // A missing version (0) is refused too.
  proto::GetStatusRequest missing;
  proto::StatusSnapshot out;
  absl::Status status = d.GetStatus(missing, &out);
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(status.message() ==
        "protocol version mismatch: the peer speaks version 0, this server speaks 5; run the same Sluice "
        "release on both");
}

TEST_CASE("dispatcher_impl: GetStatus counts everything", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  proto::StatusSnapshot empty = Snapshot(d);
  CHECK(empty.workers_size() == 0);
  CHECK(empty.datasets_size() == 0);
  CHECK(empty.jobs_size() == 0);
  CHECK(empty.iterations_size() == 0);
  CHECK(empty.tasks_size() == 0);

  Heartbeat(d, "w1:1", {}, {"a", "b"});
  Heartbeat(d, "w2:2");
  Heartbeat(d, "w3:3");
  const std::string squares = Register(d, SquaresDef());
  const std::string range = Register(d, internal::DefinitionOf(Dataset::Range(100)));
  const int64_t job1 = Job(d, squares, proto::PARALLEL_EPOCHS, "one");
  const int64_t job2 = Job(d, range, proto::DISTRIBUTED_EPOCH);
  Iteration(d, job1, 0);
  Iteration(d, job1, 0);
  Iteration(d, job1, 1);
  Iteration(d, job2, 0);
  Finish(d, "w1:1", {1});
  Shutdown(d, "w3:3");

  proto::StatusSnapshot s = Snapshot(d);
  CHECK(s.workers_size() == 2);
  CHECK(s.datasets_size() == 2);
  CHECK(s.jobs_size() == 2);
  REQUIRE(s.iterations_size() == 3);
  CHECK(s.tasks_size() == 9);
  CHECK(s.iterations(0).num_clients() == 2);
  CHECK(s.iterations(1).num_clients() == 1);
  CHECK(s.iterations(2).num_clients() == 1);
  CHECK(s.iterations(2).job_id() == job2);
  for (const auto& i : s.iterations()) CHECK_FALSE(i.finished());
  REQUIRE(s.workers_size() == 2);
  CHECK(s.workers(0).address() == "w1:1");
  CHECK(std::vector<std::string>(s.workers(0).tags().begin(), s.workers(0).tags().end()) ==
        std::vector<std::string>{"a", "b"});
  // w1's unfinished tasks: iterations 2 and 3 (task 1 is finished).
  CHECK(std::vector<int64_t>(s.workers(0).tasks().begin(), s.workers(0).tasks().end()) ==
        std::vector<int64_t>{4, 7});
  CHECK(std::vector<int64_t>(s.workers(1).tasks().begin(), s.workers(1).tasks().end()) ==
        std::vector<int64_t>{2, 5, 8});
  CHECK(s.jobs(1).params().processing_mode() == proto::DISTRIBUTED_EPOCH);
}

absl::Status TryStaticJob(DispatcherImpl& d, const std::string& dataset_id, proto::ShardingPolicy policy,
                          int64_t* job_id = nullptr) {
  proto::JobParams params;
  params.set_dataset_id(dataset_id);
  params.set_processing_mode(proto::PARALLEL_EPOCHS);
  params.set_sharding_policy(policy);
  return TryJob(d, params, job_id);
}

TEST_CASE("dispatcher_impl: static sharding runs shard i on listed worker i, and waits for every shard",
          "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.worker_addresses = {"w1:1", "w2:2", "w3:3"};
  std::vector<proto::TaskDef> pushed;
  DispatcherImpl d(config, [&](const std::string&, const proto::TaskDef& task) { pushed.push_back(task); });
  Heartbeat(d, "w2:2");
  Heartbeat(d, "w1:1");
  Heartbeat(d, "other:9");  // not listed: runs no shard
  int64_t job = 0;
  REQUIRE(TryStaticJob(d, Register(d, internal::DefinitionOf(Dataset::Range(20))), proto::SHARDING_DATA, &job)
              .ok());
  const auto it = Iteration(d, job);
  REQUIRE(pushed.size() == 2);
  CHECK(pushed[0].task_id() == 1);
  CHECK(pushed[0].shard_index() == 0);  // w1:1
  CHECK(pushed[1].shard_index() == 1);  // w2:2
  for (const auto& task : pushed) {
    CHECK(task.num_shards() == 3);
    CHECK(task.sharding_policy() == proto::SHARDING_DATA);
    CHECK(task.processing_mode() == proto::PARALLEL_EPOCHS);
  }
  Finish(d, "w1:1", {1});
  Finish(d, "w2:2", {2});
  // Shard 2 has not run: its worker has not come yet.
  CHECK_FALSE(ClientBeat(d, it.iteration_client_id()).iteration_finished());
  proto::WorkerHeartbeatResponse third = Heartbeat(d, "w3:3");
  REQUIRE(third.new_tasks_size() == 1);
  CHECK(third.new_tasks(0).shard_index() == 2);
  Finish(d, "w3:3", {third.new_tasks(0).task_id()});
  CHECK(ClientBeat(d, it.iteration_client_id()).iteration_finished());
}

TEST_CASE("dispatcher_impl: a lost worker's shard runs again when a worker is back at its address",
          "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.worker_addresses = {"w1:1", "w2:2"};
  DispatcherImpl d(config);
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  int64_t job = 0;
  REQUIRE(TryStaticJob(d, Register(d, internal::DefinitionOf(Dataset::Range(20))), proto::SHARDING_DATA, &job)
              .ok());
  const auto it = Iteration(d, job);
  Finish(d, "w1:1", {1});
  Shutdown(d, "w2:2");
  CHECK_FALSE(ClientBeat(d, it.iteration_client_id()).iteration_finished());
  proto::WorkerHeartbeatResponse back = Heartbeat(d, "w2:2");
  REQUIRE(back.new_tasks_size() == 1);
  CHECK(back.new_tasks(0).shard_index() == 1);
  Finish(d, "w2:2", {back.new_tasks(0).task_id()});
  CHECK(ClientBeat(d, it.iteration_client_id()).iteration_finished());
}

TEST_CASE("dispatcher_impl: static sharding errors", "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  DispatcherImpl unlisted(config);
  absl::Status none = TryStaticJob(unlisted, Register(unlisted, internal::DefinitionOf(Dataset::Range(20))),
                                   proto::SHARDING_DATA);
  REQUIRE(absl::IsFailedPrecondition(none));
  CHECK(none.message() ==
        "sharding policy DATA needs the dispatcher's worker_addresses (the workers to shard over, in order); "
        "it "
        "has none");

  config.worker_addresses = {"w1:1", "w2:2", "w3:3", "w4:4", "w5:5"};
  DispatcherImpl d(config);
  absl::Status files = TryStaticJob(
      d, Register(d, internal::DefinitionOf(Dataset::TFRecord({"a", "b", "c", "d"}))), proto::SHARDING_FILE);
  REQUIRE(absl::IsInvalidArgument(files));
  CHECK(files.message() == "FILE sharding over 5 workers needs at least as many files; tfrecord reads 4");
  absl::Status hint =
      TryStaticJob(d, Register(d, internal::DefinitionOf(Dataset::Range(3))), proto::SHARDING_HINT);
  CHECK(hint.message() ==
        "HINT sharding needs a shard step with num_shards: -1 and index: -1 (SHARD_HINT); the pipeline has "
        "none");

  proto::GetOrCreateJobRequest request;
  *request.mutable_version() = CurrentVersion();
  request.mutable_params()->set_dataset_id(Register(d, internal::DefinitionOf(Dataset::Range(3))));
  request.mutable_params()->set_processing_mode(proto::PARALLEL_EPOCHS);
  request.mutable_params()->set_sharding_policy(proto::SHARDING_DYNAMIC);
  proto::GetOrCreateJobResponse response;
  absl::Status mismatch = d.GetOrCreateJob(request, &response);
  REQUIRE(absl::IsInvalidArgument(mismatch));
  CHECK(mismatch.message() == "job: sharding policy DYNAMIC does not go with parallel_epochs");
}

absl::Status TryExactlyOnceJob(DispatcherImpl& d, const proto::DatasetDef& def, proto::ProcessingMode mode) {
  proto::JobParams params;
  params.set_dataset_id(Register(d, def));
  params.set_processing_mode(mode);
  params.set_exactly_once(true);
  return TryJob(d, params);
}

TEST_CASE("dispatcher_impl: exactly_once takes distributed_epoch pipelines that run per split only",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  CHECK(TryExactlyOnceJob(
            d,
            internal::DefinitionOf(
                Dataset::Range(10).Map("square", {}, {4, true}).Filter("less", {{"value", 50}}).Prefetch(2)),
            proto::DISTRIBUTED_EPOCH)
            .ok());
  const std::string prefix =
      "exactly_once"
      " runs the worker side once per split, so that every element comes from one split and is the same on "
      "every run; it takes a splittable source, then map, filter, tokenize, pack_sequences, prefetch and at "
      "most one batch "
      "or "
      "padded_batch (docs/pipeline.md): step ";
  CHECK(TryExactlyOnceJob(d, internal::DefinitionOf(Dataset::Range(10).Batch(2)), proto::DISTRIBUTED_EPOCH)
            .ok());
  absl::Status shuffled_source = TryExactlyOnceJob(
      d, internal::DefinitionOf(Dataset::Range(10).Shuffle(4, 1)), proto::DISTRIBUTED_EPOCH);
  REQUIRE(absl::IsFailedPrecondition(shuffled_source));
  CHECK(shuffled_source.message() ==
        prefix +
            "2 is shuffle, whose output depends on more than one split (shuffle the source with a seed "
            "instead)");
  proto::DatasetDef unordered = internal::DefinitionOf(Dataset::Range(10).Map("square", {}, {4, false}));
  absl::Status shuffled = TryExactlyOnceJob(d, unordered, proto::DISTRIBUTED_EPOCH);
  CHECK(shuffled.message() ==
        prefix + "2 is a map with deterministic: false, whose order changes from run to run");
  absl::Status parallel =
      TryExactlyOnceJob(d, internal::DefinitionOf(Dataset::Range(10)), proto::PARALLEL_EPOCHS);
  REQUIRE(absl::IsFailedPrecondition(parallel));
  CHECK(parallel.message() == "exactly_once needs distributed_epoch; the job is parallel_epochs");
}

TEST_CASE("dispatcher_impl: coordinated reads fix task lists through a horizon a window ahead",
          "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.round_window = 10;
  DispatcherImpl d(config);
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  proto::GetOrCreateJobRequest job_request;
  *job_request.mutable_version() = CurrentVersion();
  job_request.mutable_params()->set_dataset_id(
      Register(d, internal::DefinitionOf(Dataset::Range(5).Repeat())));
  job_request.mutable_params()->set_processing_mode(proto::PARALLEL_EPOCHS);
  job_request.mutable_params()->set_job_name("c");
  job_request.mutable_params()->set_num_consumers(2);
  proto::GetOrCreateJobResponse job;
  REQUIRE(d.GetOrCreateJob(job_request, &job).ok());
  auto join = [&](int64_t consumer, proto::GetOrCreateIterationResponse* response) {
    proto::GetOrCreateIterationRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_job_id(job.job_id());
    request.set_consumer_index(consumer);
    return d.GetOrCreateIteration(request, response);
  };
  proto::GetOrCreateIterationResponse first;
  proto::GetOrCreateIterationResponse second;
  REQUIRE(join(0, &first).ok());
  REQUIRE(join(1, &second).ok());
  proto::GetOrCreateIterationResponse again;
  CHECK(join(0, &again).message() ==
        "job 'c' is at round 0: consumer 0 has already joined; a set of 2 coordinated consumers must start "
        "together "
        "at round 0");
  CHECK(join(2, &again).message() == "consumer_index 2 is out of range for 2 consumers");

  proto::ClientHeartbeatResponse beat = ClientBeat(d, first.iteration_client_id());
  CHECK(beat.round_horizon() == 10);
  CHECK(beat.furthest_round() == 0);
  // At round 7, past half the window: the horizon moves to 17.
  proto::ClientHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_client_id(second.iteration_client_id());
  request.set_client_secret(d.ClientSecretOf(request.iteration_client_id()));
  request.set_current_round(7);
  proto::ClientHeartbeatResponse moved;
  REQUIRE(d.ClientHeartbeat(request, &moved).ok());
  CHECK(moved.round_horizon() == 17);
  // Every consumer hears how far the furthest one is, so that one left
  // behind at round 5 knows round 5 was taken.
  request.set_current_round(5);
  proto::ClientHeartbeatResponse behind;
  REQUIRE(d.ClientHeartbeat(request, &behind).ok());
  CHECK(behind.furthest_round() == 7);
  CHECK(ClientBeat(d, first.iteration_client_id()).furthest_round() == 7);
  // Past the horizon (17) by more than one round: refused, and neither the
  // horizon nor the furthest round moves (2^63-1 once froze every reader).
  for (int64_t round : {int64_t{19}, std::numeric_limits<int64_t>::max()}) {
    request.set_current_round(round);
    proto::ClientHeartbeatResponse refused;
    const absl::Status past = d.ClientHeartbeat(request, &refused);
    CHECK(past.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(past.message()) ==
          absl::StrCat("ClientHeartbeat: current_round ", round,
                       " is past round_horizon 17 + 1 of iteration 1: a consumer reads past the horizon only "
                       "with a newer task list"));
  }
  CHECK(ClientBeat(d, first.iteration_client_id()).round_horizon() == 17);
  CHECK(ClientBeat(d, first.iteration_client_id()).furthest_round() == 7);
  // Another client's id without its secret: refused before anything moves.
  proto::ClientHeartbeatRequest forged = request;
  forged.set_current_round(8);
  forged.set_client_secret(first.client_secret());
  proto::ClientHeartbeatResponse refused;
  const absl::Status stolen = d.ClientHeartbeat(forged, &refused);
  CHECK(stolen.code() == absl::StatusCode::kPermissionDenied);
  CHECK(std::string(stolen.message()) ==
        absl::StrCat(
            "ClientHeartbeat: iteration client ", second.iteration_client_id(),
            " was not created by this caller: client_secret is wrong (a client may act only in its own "
            "name)"));
  CHECK(ClientBeat(d, first.iteration_client_id()).furthest_round() == 7);
  // A worker joining now serves from round 18; the first two from round 0.
  Heartbeat(d, "w3:3");
  std::vector<std::pair<int64_t, int64_t>> starts;
  const proto::ClientHeartbeatResponse listing = ClientBeat(d, first.iteration_client_id());
  for (const auto& task : listing.tasks()) {
    starts.emplace_back(task.task_id(), task.starting_round());
  }
  CHECK(starts == std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {2, 0}, {3, 18}});
}

TEST_CASE("dispatcher_impl: coordinated reads need an infinite dataset and a job name", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  proto::GetOrCreateJobRequest request;
  *request.mutable_version() = CurrentVersion();
  request.mutable_params()->set_dataset_id(Register(d, internal::DefinitionOf(Dataset::Range(5))));
  request.mutable_params()->set_processing_mode(proto::PARALLEL_EPOCHS);
  request.mutable_params()->set_num_consumers(2);
  proto::GetOrCreateJobResponse response;
  CHECK(d.GetOrCreateJob(request, &response).message() ==
        "coordinated reads (num_consumers) need a job_name that the consumers share");
  request.mutable_params()->set_job_name("c");
  absl::Status finite = d.GetOrCreateJob(request, &response);
  REQUIRE(absl::IsFailedPrecondition(finite));
  CHECK(finite.message() ==
        "coordinated reads (num_consumers) need an infinite dataset, so that every round has an element for "
        "each "
        "consumer; dataset 1000 has 5 elements (add repeat)");
  request.mutable_params()->set_processing_mode(proto::DISTRIBUTED_EPOCH);
  CHECK(d.GetOrCreateJob(request, &response).message() ==
        "coordinated reads (num_consumers) need parallel_epochs (sharding OFF)");
}

TEST_CASE("dispatcher_impl: a restored iteration's skip_splits need exactly_once and the same split layout",
          "[dispatcher][checkpoint]") {
  DispatcherImpl d(TestConfig());
  auto iteration = [&d](bool exactly_once, const std::string& layout) {
    proto::JobParams params;
    params.set_dataset_id(Register(d, internal::DefinitionOf(Dataset::Range(100))));
    params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
    params.set_exactly_once(exactly_once);
    int64_t job_id = 0;
    REQUIRE(TryJob(d, params, &job_id).ok());
    proto::GetOrCreateIterationRequest request;
    request.set_job_id(job_id);
    for (int64_t seq : {1, 3}) request.add_skip_splits(seq);
    request.set_split_layout(layout);
    proto::GetOrCreateIterationResponse response;
    absl::Status status = Call(d, &DispatcherImpl::GetOrCreateIteration, request, &response);
    if (status.ok()) CHECK(response.split_layout() == "elements_per_split=10");
    return status;
  };
  CHECK(iteration(true, "elements_per_split=10").ok());
  const absl::Status other_layout = iteration(true, "elements_per_split=64");
  CHECK(absl::IsFailedPrecondition(other_layout));
  CHECK(
      other_layout.message() ==
      "GetOrCreateIteration: the restored read was saved under split layout 'elements_per_split=64' and this "
      "dispatcher cuts 'elements_per_split=10' (--elements-per-split), so split numbers would name other "
      "elements: restart it with the same setting");
  const std::string needs =
      "GetOrCreateIteration: skip_splits (a restored read) needs a distributed_epoch exactly_once job over a "
      "finite dataset, and the split_layout it was saved under";
  CHECK(iteration(false, "elements_per_split=10").message() == needs);
  CHECK(iteration(true, "").message() == needs);
}

TEST_CASE("dispatcher_impl: a deterministic job leases at most 1,024 elements and takes one consumer",
          "[dispatcher][deterministic]") {
  DispatcherConfig config = TestConfig();
  config.splits_per_request = 1000;
  config.elements_per_split = 100;
  DispatcherImpl d(config);
  Heartbeat(d, "w1:1");
  // Splits handed out by a first lease of `max_splits` in a new job.
  auto first_lease = [&d](bool deterministic, const std::string& name) {
    proto::JobParams params;
    params.set_dataset_id(Register(d, internal::DefinitionOf(Dataset::Range(1000000))));
    params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
    params.set_exactly_once(true);
    params.set_deterministic(deterministic);
    params.set_job_name(name);
    int64_t job_id = 0;
    REQUIRE(TryJob(d, params, &job_id).ok());
    const proto::GetOrCreateIterationResponse iteration = Iteration(d, job_id, 0);
    proto::GetSplitsRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_iteration_id(iteration.iteration_id());
    request.set_task_id(Snapshot(d).tasks(Snapshot(d).tasks_size() - 1).task_id());
    request.set_max_splits(500);
    proto::GetSplitsResponse response;
    REQUIRE(d.GetSplits(request, &response).ok());
    int64_t splits = 0;
    for (const auto& split : response.splits()) splits += std::max<int64_t>(split.count(), 1);
    return std::make_pair(splits, job_id);
  };
  CHECK(first_lease(false, "").first == 500);
  // 1,024 elements of 100 per split.
  const auto [splits, job_id] = first_lease(true, "ordered");
  CHECK(splits == 10);

  proto::GetOrCreateIterationRequest second;
  second.set_job_id(job_id);
  proto::GetOrCreateIterationResponse response;
  const absl::Status refused = Call(d, &DispatcherImpl::GetOrCreateIteration, second, &response);
  CHECK(absl::IsFailedPrecondition(refused));
  CHECK(
      refused.message() ==
      "job 'ordered' is deterministic and its repetition 0 already has or had a consumer: another would take "
      "part of its splits, so no order could be reproduced (read it from one consumer, under a new job_name "
      "to read it again, or set deterministic: false)");
}

}  // namespace
}  // namespace sluice::dispatcher
