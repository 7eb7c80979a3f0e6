#include "dispatcher/dispatcher_impl.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/builder.h"
#include "pipeline/split_provider.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

constexpr char kMismatch[] =
    "protocol version mismatch: the peer speaks version 3, this server speaks 2; run the same Sluice release "
    "on both";

DispatcherConfig TestConfig() {
  DispatcherConfig config;
  config.splits_per_request = 4;
  config.elements_per_split = 10;
  return config;
}

proto::DatasetDef SquaresDef() { return Dataset::Range(10).Map("square").def(); }

// Small wrappers that fill `version` and REQUIRE success.
std::string Register(DispatcherImpl& d, const proto::DatasetDef& def, const std::string& id = "") {
  proto::GetOrRegisterDatasetRequest request;
  *request.mutable_version() = CurrentVersion();
  *request.mutable_dataset() = def;
  request.set_dataset_id(id);
  proto::GetOrRegisterDatasetResponse response;
  absl::Status status = d.GetOrRegisterDataset(request, &response);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return response.dataset_id();
}

absl::Status TryRegister(DispatcherImpl& d, const proto::DatasetDef& def, const std::string& id = "") {
  proto::GetOrRegisterDatasetRequest request;
  *request.mutable_version() = CurrentVersion();
  *request.mutable_dataset() = def;
  request.set_dataset_id(id);
  proto::GetOrRegisterDatasetResponse response;
  return d.GetOrRegisterDataset(request, &response);
}

absl::Status TryJob(DispatcherImpl& d, const std::string& dataset_id, proto::ProcessingMode mode,
                    const std::string& name, int64_t* job_id = nullptr) {
  proto::GetOrCreateJobRequest request;
  *request.mutable_version() = CurrentVersion();
  request.mutable_params()->set_dataset_id(dataset_id);
  request.mutable_params()->set_processing_mode(mode);
  request.mutable_params()->set_job_name(name);
  proto::GetOrCreateJobResponse response;
  absl::Status status = d.GetOrCreateJob(request, &response);
  if (job_id != nullptr) *job_id = response.job_id();
  return status;
}

int64_t Job(DispatcherImpl& d, const std::string& dataset_id,
            proto::ProcessingMode mode = proto::PARALLEL_EPOCHS, const std::string& name = "") {
  int64_t job_id = 0;
  absl::Status status = TryJob(d, dataset_id, mode, name, &job_id);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return job_id;
}

proto::GetOrCreateIterationResponse Iteration(DispatcherImpl& d, int64_t job_id, int64_t repetition = 0) {
  proto::GetOrCreateIterationRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_job_id(job_id);
  request.set_repetition(repetition);
  proto::GetOrCreateIterationResponse response;
  absl::Status status = d.GetOrCreateIteration(request, &response);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return response;
}

proto::WorkerHeartbeatResponse Heartbeat(DispatcherImpl& d, const std::string& address,
                                         const std::vector<int64_t>& current = {},
                                         const std::vector<std::string>& tags = {}) {
  proto::WorkerHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_worker_address(address);
  for (int64_t id : current) request.add_current_tasks(id);
  for (const std::string& tag : tags) request.add_tags(tag);
  proto::WorkerHeartbeatResponse response;
  absl::Status status = d.WorkerHeartbeat(request, &response);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return response;
}

proto::ClientHeartbeatResponse ClientReport(DispatcherImpl& d, int64_t client_id,
                                            const std::vector<int64_t>& completed_tasks,
                                            const std::vector<std::string>& unreachable = {}) {
  proto::ClientHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_client_id(client_id);
  for (int64_t id : completed_tasks) request.add_completed_tasks(id);
  for (const std::string& address : unreachable) request.add_unreachable_workers(address);
  proto::ClientHeartbeatResponse response;
  absl::Status status = d.ClientHeartbeat(request, &response);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return response;
}

proto::ClientHeartbeatResponse ClientBeat(DispatcherImpl& d, int64_t client_id) {
  return ClientReport(d, client_id, {});
}

void Finish(DispatcherImpl& d, const std::string& address, const std::vector<int64_t>& tasks) {
  proto::WorkerUpdatesRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_worker_address(address);
  for (int64_t id : tasks) request.add_finished_tasks(id);
  proto::WorkerUpdatesResponse response;
  absl::Status status = d.WorkerUpdates(request, &response);
  INFO(status.ToString());
  REQUIRE(status.ok());
}

void Shutdown(DispatcherImpl& d, const std::string& address) {
  proto::WorkerShutdownRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_worker_address(address);
  proto::WorkerShutdownResponse response;
  absl::Status status = d.WorkerShutdown(request, &response);
  INFO(status.ToString());
  REQUIRE(status.ok());
}

// GetSplits's answer as sent: consecutive splits joined into runs.
proto::GetSplitsResponse RawSplits(DispatcherImpl& d, int64_t iteration_id, int64_t task_id, int max_splits,
                                   int64_t request_id = 0) {
  proto::GetSplitsRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_id(iteration_id);
  request.set_task_id(task_id);
  request.set_max_splits(max_splits);
  request.set_request_id(request_id);
  proto::GetSplitsResponse response;
  absl::Status status = d.GetSplits(request, &response);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return response;
}

// The same answer with every run expanded into its single splits.
proto::GetSplitsResponse Splits(DispatcherImpl& d, int64_t iteration_id, int64_t task_id, int max_splits,
                                int64_t request_id = 0) {
  const proto::GetSplitsResponse runs = RawSplits(d, iteration_id, task_id, max_splits, request_id);
  proto::GetSplitsResponse splits;
  splits.set_end_of_splits(runs.end_of_splits());
  for (const proto::SplitProto& message : runs.splits()) {
    const Split run = SplitFromMessage(message);
    for (int64_t i = 0; i < run.count; ++i) SplitToMessage(SplitRunPart(run, i, 1), splits.add_splits());
  }
  return splits;
}

proto::StatusSnapshot Snapshot(DispatcherImpl& d) {
  proto::GetStatusRequest request;
  *request.mutable_version() = CurrentVersion();
  proto::StatusSnapshot response;
  REQUIRE(d.GetStatus(request, &response).ok());
  return response;
}

std::vector<std::string> WorkerAddresses(DispatcherImpl& d) {
  proto::GetWorkersRequest request;
  *request.mutable_version() = CurrentVersion();
  proto::GetWorkersResponse response;
  REQUIRE(d.GetWorkers(request, &response).ok());
  std::vector<std::string> addresses;
  for (const auto& w : response.workers()) addresses.push_back(w.address());
  return addresses;
}

// (task id, worker address) pairs of a client heartbeat, in order.
std::vector<std::pair<int64_t, std::string>> Listed(const proto::ClientHeartbeatResponse& response) {
  std::vector<std::pair<int64_t, std::string>> tasks;
  for (const auto& t : response.tasks()) tasks.emplace_back(t.task_id(), t.worker_address());
  return tasks;
}

std::vector<int64_t> NewTaskIds(const proto::WorkerHeartbeatResponse& response) {
  std::vector<int64_t> ids;
  for (const auto& t : response.new_tasks()) ids.push_back(t.task_id());
  return ids;
}

using Listing = std::vector<std::pair<int64_t, std::string>>;

TEST_CASE("dispatcher_impl: GetVersion reports the protocol and server versions", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  proto::GetVersionResponse response;
  REQUIRE(d.GetVersion(proto::GetVersionRequest(), &response).ok());
  CHECK(response.protocol_version() == 2);
  CHECK(response.server_version() == "sluice 0.1.0");
}

TEST_CASE("dispatcher_impl: the same definition registers once", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  CHECK(Register(d, SquaresDef()) == "1000");
  CHECK(Register(d, SquaresDef()) == "1000");
  // Built separately, the same steps give the same definition.
  CHECK(Register(d, Dataset::Range(10).Map("square").def()) == "1000");
  CHECK(Register(d, Dataset::Range(11).Map("square").def()) == "1001");
  CHECK(Register(d, SquaresDef()) == "1000");
  proto::StatusSnapshot snapshot = Snapshot(d);
  REQUIRE(snapshot.datasets_size() == 2);
  CHECK(snapshot.datasets(0).dataset_id() == "1000");
  CHECK(snapshot.datasets(0).fingerprint() == DatasetFingerprint(SquaresDef()));
  CHECK(snapshot.datasets(1).dataset_id() == "1001");
  CHECK(snapshot.datasets(1).fingerprint() == DatasetFingerprint(Dataset::Range(11).Map("square").def()));
}

TEST_CASE("dispatcher_impl: an explicit dataset id", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  CHECK(Register(d, SquaresDef(), "mine") == "mine");
  // Same id, same definition: the same dataset.
  CHECK(Register(d, SquaresDef(), "mine") == "mine");
  // Same id, another definition: refused.
  absl::Status status = TryRegister(d, Dataset::Range(5).def(), "mine");
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "dataset id 'mine' is already registered with a different definition");
  // Without an id, the fingerprint finds the named dataset.
  CHECK(Register(d, SquaresDef()) == "mine");
  // Numbered ids continue from 1000.
  CHECK(Register(d, Dataset::Range(5).def()) == "1000");
  CHECK(Snapshot(d).datasets_size() == 2);
}

TEST_CASE("dispatcher_impl: a definition that cannot be built is refused", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  absl::Status status = TryRegister(d, Dataset::Range(10).Batch(0).def());
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
  const std::string batched = Register(d, Dataset::Range(10).Batch(4).def());
  const std::string dropped = Register(d, Dataset::Range(10).Batch(4, /*drop_remainder=*/true).def());

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
  const std::string other = Register(d, Dataset::Range(20).def());
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

  const std::string zipped = Register(d, Dataset::Zip({Dataset::Range(3), Dataset::Range(3)}).def());
  absl::Status zip = TryJob(d, zipped, proto::DISTRIBUTED_EPOCH, "z");
  CHECK(zip.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(zip.message() ==
        "a pipeline whose source is 'zip' cannot be split for distributed_epoch; start it with range, "
        "from_tensor_slices, list_files, text_line, tfrecord or fixed_length_record");
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
  proto::ReleaseIterationClientResponse released;
  CHECK(d.ReleaseIterationClient(release, &released).ok());
  CHECK(d.ReleaseIterationClient(release, &released).ok());
  CHECK(Snapshot(d).iterations(0).num_clients() == 0);

  proto::ClientHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_client_id(it.iteration_client_id());
  proto::ClientHeartbeatResponse response;
  absl::Status status = d.ClientHeartbeat(request, &response);
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK(status.message() == "unknown iteration client 1 (never given out, or already released)");

  request.set_iteration_client_id(99);
  absl::Status unknown = d.ClientHeartbeat(request, &response);
  CHECK(unknown.code() == absl::StatusCode::kNotFound);
  CHECK(unknown.message() == "unknown iteration client 99 (never given out, or already released)");
}

TEST_CASE("dispatcher_impl: GetSplits hands out every split of an epoch once", "[dispatcher]") {
  DispatcherImpl d(TestConfig());  // splits_per_request 4, elements_per_split 10
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(100).def()), proto::DISTRIBUTED_EPOCH));

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
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(95).def()), proto::DISTRIBUTED_EPOCH));
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
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(100).def()), proto::DISTRIBUTED_EPOCH));
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
  const int64_t job = Job(d, Register(d, Dataset::Range(25).def()), proto::DISTRIBUTED_EPOCH);
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

TEST_CASE("dispatcher_impl: WorkerShutdown ends the worker's tasks", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{1, "w1:1"}, {2, "w2:2"}});

  Shutdown(d, "w2:2");
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
  proto::ClientHeartbeatResponse after = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(after) == Listing{{1, "w1:1"}});
  CHECK_FALSE(after.iteration_finished());

  Shutdown(d, "w1:1");
  CHECK(WorkerAddresses(d).empty());
  proto::ClientHeartbeatResponse done = ClientBeat(d, it.iteration_client_id());
  CHECK(done.tasks_size() == 0);
  CHECK(done.iteration_finished());

  // Shutting down an unknown (or already gone) worker is fine.
  Shutdown(d, "w1:1");
  Shutdown(d, "nobody:9");
  proto::StatusSnapshot snapshot = Snapshot(d);
  CHECK(snapshot.workers_size() == 0);
  CHECK(snapshot.tasks_size() == 2);
  CHECK(snapshot.iterations(0).finished());
}

TEST_CASE("dispatcher_impl: a worker's shutdown finishes the iteration when the rest finished",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  Finish(d, "w1:1", {1});
  CHECK_FALSE(ClientBeat(d, it.iteration_client_id()).iteration_finished());
  Shutdown(d, "w2:2");
  proto::ClientHeartbeatResponse response = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(response) == Listing{{1, "w1:1"}});
  CHECK(response.iteration_finished());
}

TEST_CASE("dispatcher_impl: a version mismatch is FailedPrecondition", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  proto::VersionInfo wrong;
  wrong.set_protocol_version(3);
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
        "protocol version mismatch: the peer speaks version 0, this server speaks 2; run the same Sluice "
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
  const std::string range = Register(d, Dataset::Range(100).def());
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

TEST_CASE("dispatcher_impl: the monitor removes workers that stop heartbeating", "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 200;
  config.client_timeout_ms = 200;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  // The iteration first: the worker gets its task when it registers, so a
  // slow machine cannot lose the worker before the task exists.
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  REQUIRE(NewTaskIds(Heartbeat(d, "w1:1")) == std::vector<int64_t>{1});

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool removed = false;
  bool released = false;
  while (std::chrono::steady_clock::now() < deadline && !(removed && released)) {
    proto::StatusSnapshot s = Snapshot(d);
    removed = s.workers_size() == 0;
    released = s.iterations_size() == 1 && s.iterations(0).num_clients() == 0;
    if (!(removed && released)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(removed);
  CHECK(released);
  proto::StatusSnapshot s = Snapshot(d);
  REQUIRE(s.iterations_size() == 1);
  // The lost worker's task ended, so the iteration did.
  CHECK(s.iterations(0).finished());
  CHECK(s.tasks_size() == 1);
  (void)it;

  // A worker that heartbeats again is registered again.
  Heartbeat(d, "w1:1");
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
}

TEST_CASE("dispatcher_impl: an iteration without clients is collected, one with a client never",
          "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.job_gc_timeout_ms = 200;
  config.job_retention_ms = 600000;  // the collected iteration stays in view
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1");
  const std::string dataset = Register(d, SquaresDef());
  const auto abandoned = Iteration(d, Job(d, dataset, proto::PARALLEL_EPOCHS, "abandoned"));
  const auto live = Iteration(d, Job(d, dataset, proto::PARALLEL_EPOCHS, "live"));
  REQUIRE(NewTaskIds(Heartbeat(d, "w1:1")) == std::vector<int64_t>{1, 2});
  proto::ReleaseIterationClientRequest release;
  *release.mutable_version() = CurrentVersion();
  release.set_iteration_client_id(abandoned.iteration_client_id());
  proto::ReleaseIterationClientResponse released;
  REQUIRE(d.ReleaseIterationClient(release, &released).ok());

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline && !Snapshot(d).iterations(0).collected()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Well past the timeout, so that the live one would have gone too.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  proto::StatusSnapshot s = Snapshot(d);
  REQUIRE(s.iterations_size() == 2);
  CHECK(s.iterations(0).collected());
  CHECK(s.iterations(0).finished());
  CHECK_FALSE(s.iterations(1).collected());
  CHECK_FALSE(s.iterations(1).finished());

  // The worker drops the collected iteration's task and keeps the other.
  proto::WorkerHeartbeatResponse beat = Heartbeat(d, "w1:1", {1, 2});
  CHECK(std::vector<int64_t>(beat.tasks_to_delete().begin(), beat.tasks_to_delete().end()) ==
        std::vector<int64_t>{1});
  CHECK(beat.new_tasks_size() == 0);
  // A consumer joining the collected repetition ends at once: finished, no tasks.
  const auto late = Iteration(d, Job(d, dataset, proto::PARALLEL_EPOCHS, "abandoned"));
  CHECK(late.iteration_id() == abandoned.iteration_id());
  proto::ClientHeartbeatResponse joined = ClientBeat(d, late.iteration_client_id());
  CHECK(joined.iteration_finished());
  CHECK(joined.tasks_size() == 0);
  // A worker registering now gets no task of it.
  CHECK(NewTaskIds(Heartbeat(d, "w2:2")) == std::vector<int64_t>{3});
  CHECK(ClientBeat(d, live.iteration_client_id()).tasks_size() == 2);
}

TEST_CASE("dispatcher_impl: the monitor stops promptly on destruction", "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 60000;
  const auto start = std::chrono::steady_clock::now();
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
  }
  // The monitor waits up to worker_timeout_ms / 10 (6 s) between checks;
  // destruction wakes it at once.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
}

// Protocol (service.proto): "The iteration's live tasks; a task that
// disappears is over." A task that ended because its worker went away must
// not come back when a worker registers again at the same address (a
// restart on the same host:port): that worker no longer runs it.
TEST_CASE("dispatcher_impl: a removed worker's old tasks stay gone after it re-registers", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const int64_t job = Job(d, Register(d, SquaresDef()));
  const auto it = Iteration(d, job);
  Shutdown(d, "w2:2");
  proto::ClientHeartbeatResponse beat = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(beat) == Listing{{1, "w1:1"}});
  // Its readers learn that its epoch was cut short, and why.
  REQUIRE(beat.lost_tasks_size() == 1);
  CHECK(beat.lost_tasks(0).task_id() == 2);
  CHECK(beat.lost_tasks(0).worker_address() == "w2:2");
  CHECK(beat.lost_tasks(0).reason() == "worker shut down");
  // w2 comes back: in parallel_epochs it does not run this iteration's
  // epoch again (what it had delivered would repeat)...
  CHECK(NewTaskIds(Heartbeat(d, "w2:2")).empty());
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{1, "w1:1"}});
  // ...but runs the next one.
  const auto next = Iteration(d, job, 1);
  CHECK(Listed(ClientBeat(d, next.iteration_client_id())) == Listing{{3, "w1:1"}, {4, "w2:2"}});
}

// The begin of each split of a GetSplits answer, and its seq.
std::vector<std::pair<int64_t, int64_t>> Begins(const proto::GetSplitsResponse& response) {
  std::vector<std::pair<int64_t, int64_t>> begins;
  for (const auto& split : response.splits()) begins.emplace_back(split.begin(), split.seq());
  return begins;
}
using BeginsAndSeqs = std::vector<std::pair<int64_t, int64_t>>;

TEST_CASE("dispatcher_impl: a retried GetSplits gets the same splits, the next request new ones",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(100).def()), proto::DISTRIBUTED_EPOCH));
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 2)) == BeginsAndSeqs{{20, 3}, {30, 4}});
}

TEST_CASE("dispatcher_impl: a lost worker's splits go to the other task before new ones", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(100).def()), proto::DISTRIBUTED_EPOCH));
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
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(30).def()), proto::DISTRIBUTED_EPOCH));
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
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(30).def()), proto::DISTRIBUTED_EPOCH));
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

TEST_CASE("dispatcher_impl: a worker restarted at the same address loses its old tasks", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  auto beat = [&](const std::string& incarnation, const std::vector<int64_t>& current) {
    proto::WorkerHeartbeatRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_worker_address("w1:1");
    request.set_incarnation(incarnation);
    for (int64_t id : current) request.add_current_tasks(id);
    proto::WorkerHeartbeatResponse response;
    REQUIRE(d.WorkerHeartbeat(request, &response).ok());
    return response;
  };
  beat("first", {});
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(30).def()), proto::DISTRIBUTED_EPOCH));
  Splits(d, it.iteration_id(), 1, 2, 1);
  CHECK(NewTaskIds(beat("first", {1})).empty());
  // The same address, a new process: task 1 is lost, task 2 takes its splits.
  CHECK(NewTaskIds(beat("second", {})) == std::vector<int64_t>{2});
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{2, "w1:1"}});
  CHECK(Begins(Splits(d, it.iteration_id(), 2, 4, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}, {20, 3}});
}

TEST_CASE("dispatcher_impl: a client's report removes an unreachable worker only when it is silent",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  // Heard from just now: a client's trouble reaching it is not enough.
  CHECK(Listed(ClientReport(d, it.iteration_client_id(), {}, {"w1:1"})) == Listing{{1, "w1:1"}, {2, "w2:2"}});
  std::this_thread::sleep_for(kUnreachableWorkerSilence + std::chrono::milliseconds(100));
  Heartbeat(d, "w2:2", {2});
  CHECK(Listed(ClientReport(d, it.iteration_client_id(), {}, {"w1:1", "w2:2", "nobody:3"})) ==
        Listing{{2, "w2:2"}});
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w2:2"});
}

TEST_CASE("dispatcher_impl: a restarted dispatcher resumes from its work dir", "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  SECTION("from the journal") {}
  SECTION("from snapshots taken every 2 records") { config.snapshot_interval = 2; }
  proto::GetOrCreateIterationResponse it;
  int64_t job = 0;
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
    job = Job(d, Register(d, Dataset::Range(100).def()), proto::DISTRIBUTED_EPOCH, "named");
    it = Iteration(d, job);
    CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  }
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
  CHECK(Job(d, Register(d, Dataset::Range(100).def()), proto::DISTRIBUTED_EPOCH, "named") == job);
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{1, "w1:1"}});
  // The worker's retry of its last request, then its next one.
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 2)) == BeginsAndSeqs{{20, 3}, {30, 4}});
  // Ids go on where they stood.
  const auto second = Iteration(d, job, 1);
  CHECK(second.iteration_id() == it.iteration_id() + 1);
  CHECK(second.iteration_client_id() == it.iteration_client_id() + 1);
}

// An endless distributed_epoch read journals a LeaseSplits record per
// worker request, each of thousands of splits: before snapshot_bytes the
// work dir grew 380 KB/s (range 3 / repeat) until 10000 records.
TEST_CASE("dispatcher_impl: the journal is compacted after snapshot_bytes, whatever its record count",
          "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  config.snapshot_bytes = 100000;
  config.splits_per_request = 1000;
  proto::GetOrCreateIterationResponse it;
  int64_t job = 0;
  auto work_dir_bytes = [&] {
    int64_t bytes = 0;
    for (const auto& file : std::filesystem::directory_iterator(config.work_dir)) bytes += file.file_size();
    return bytes;
  };
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
    job = Job(d, Register(d, Dataset::Range(3).Repeat().def()), proto::DISTRIBUTED_EPOCH, "endless");
    it = Iteration(d, job);
    int64_t largest = 0;
    for (int request = 1; request <= 200; ++request) {
      const proto::GetSplitsResponse splits = RawSplits(d, it.iteration_id(), 1, 1000, request);
      REQUIRE(splits.splits_size() == 1000);
      largest = std::max(largest, work_dir_bytes());
    }
    // 200 records of 1000 splits, about 1.8 MB, never more than one
    // snapshot's worth of records at once.
    CHECK(largest < 120000);
  }
  // The newest snapshot is far past the first.
  std::set<std::string> names;
  for (const auto& file : std::filesystem::directory_iterator(config.work_dir)) {
    names.insert(file.path().filename().string());
  }
  REQUIRE(names.size() == 2);
  CHECK(*names.begin() > "journal-0000000010.log");
  CHECK(*names.rbegin() > "snapshot-0000000010.pb");
  // Nothing was lost to the compactions: a restart goes on after split
  // 200000.
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1", {1});
  const proto::GetSplitsResponse next = RawSplits(d, it.iteration_id(), 1, 1, 201);
  REQUIRE(next.splits_size() == 1);
  CHECK(next.splits(0).seq() == 200001);
  CHECK(next.splits(0).begin() == 0);
  CHECK(next.splits(0).end() == 3);
}

TEST_CASE("dispatcher_impl: a damaged journal stops the start with its file and offset", "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.path();
  { std::ofstream(dir.File("journal-0000000001.log")) << "SLUJRNL1" << std::string(30, 'x'); }
  DispatcherImpl d(config);
  absl::Status status = d.Start();
  REQUIRE(absl::IsDataLoss(status));
  CHECK(status.message() == dir.File("journal-0000000001.log") + ": byte 8: record length checksum mismatch");
}

absl::Status TryStaticJob(DispatcherImpl& d, const std::string& dataset_id, proto::ShardingPolicy policy,
                          int64_t* job_id = nullptr) {
  proto::GetOrCreateJobRequest request;
  *request.mutable_version() = CurrentVersion();
  request.mutable_params()->set_dataset_id(dataset_id);
  request.mutable_params()->set_processing_mode(proto::PARALLEL_EPOCHS);
  request.mutable_params()->set_sharding_policy(policy);
  proto::GetOrCreateJobResponse response;
  absl::Status status = d.GetOrCreateJob(request, &response);
  if (job_id != nullptr) *job_id = response.job_id();
  return status;
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
  REQUIRE(TryStaticJob(d, Register(d, Dataset::Range(20).def()), proto::SHARDING_DATA, &job).ok());
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
  REQUIRE(TryStaticJob(d, Register(d, Dataset::Range(20).def()), proto::SHARDING_DATA, &job).ok());
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
  absl::Status none =
      TryStaticJob(unlisted, Register(unlisted, Dataset::Range(20).def()), proto::SHARDING_DATA);
  REQUIRE(absl::IsFailedPrecondition(none));
  CHECK(none.message() ==
        "sharding policy DATA needs the dispatcher's worker_addresses (the workers to shard over, in order); "
        "it "
        "has none");

  config.worker_addresses = {"w1:1", "w2:2", "w3:3", "w4:4", "w5:5"};
  DispatcherImpl d(config);
  absl::Status files =
      TryStaticJob(d, Register(d, Dataset::TFRecord({"a", "b", "c", "d"}).def()), proto::SHARDING_FILE);
  REQUIRE(absl::IsInvalidArgument(files));
  CHECK(files.message() == "FILE sharding over 5 workers needs at least as many files; tfrecord reads 4");
  absl::Status hint = TryStaticJob(d, Register(d, Dataset::Range(3).def()), proto::SHARDING_HINT);
  CHECK(hint.message() ==
        "HINT sharding needs a shard step with num_shards: -1 and index: -1 (SHARD_HINT); the pipeline has "
        "none");

  proto::GetOrCreateJobRequest request;
  *request.mutable_version() = CurrentVersion();
  request.mutable_params()->set_dataset_id(Register(d, Dataset::Range(3).def()));
  request.mutable_params()->set_processing_mode(proto::PARALLEL_EPOCHS);
  request.mutable_params()->set_sharding_policy(proto::SHARDING_DYNAMIC);
  proto::GetOrCreateJobResponse response;
  absl::Status mismatch = d.GetOrCreateJob(request, &response);
  REQUIRE(absl::IsInvalidArgument(mismatch));
  CHECK(mismatch.message() == "job: sharding policy DYNAMIC does not go with parallel_epochs");
}

absl::Status TryExactlyOnceJob(DispatcherImpl& d, const proto::DatasetDef& def, proto::ProcessingMode mode) {
  proto::GetOrCreateJobRequest request;
  *request.mutable_version() = CurrentVersion();
  request.mutable_params()->set_dataset_id(Register(d, def));
  request.mutable_params()->set_processing_mode(mode);
  request.mutable_params()->set_exactly_once(true);
  proto::GetOrCreateJobResponse response;
  return d.GetOrCreateJob(request, &response);
}

TEST_CASE("dispatcher_impl: exactly_once takes element-wise distributed_epoch pipelines only",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  CHECK(TryExactlyOnceJob(
            d,
            Dataset::Range(10).Map("square", {}, {4, true}).Filter("less", {{"value", 50}}).Prefetch(2).def(),
            proto::DISTRIBUTED_EPOCH)
            .ok());
  const std::string prefix =
      "exactly_once needs a worker side that is element-wise (range or from_tensor_slices, then map, filter "
      "or "
      "prefetch; batch after distribute): step ";
  absl::Status batched = TryExactlyOnceJob(d, Dataset::Range(10).Batch(2).def(), proto::DISTRIBUTED_EPOCH);
  REQUIRE(absl::IsFailedPrecondition(batched));
  CHECK(batched.message() == prefix + "2 is batch");
  absl::Status files = TryExactlyOnceJob(d, Dataset::TFRecord({"a"}).def(), proto::DISTRIBUTED_EPOCH);
  CHECK(files.message() == prefix + "1 is not range or from_tensor_slices");
  proto::DatasetDef unordered = Dataset::Range(10).Map("square", {}, {4, false}).def();
  absl::Status shuffled = TryExactlyOnceJob(d, unordered, proto::DISTRIBUTED_EPOCH);
  CHECK(shuffled.message() ==
        prefix + "2 is a map with deterministic: false, whose order changes from run to run");
  absl::Status parallel = TryExactlyOnceJob(d, Dataset::Range(10).def(), proto::PARALLEL_EPOCHS);
  REQUIRE(absl::IsFailedPrecondition(parallel));
  CHECK(parallel.message() == "exactly_once needs distributed_epoch; the job is parallel_epochs");
}

TEST_CASE("dispatcher_impl: splits a client reports received are not handed out again", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, Dataset::Range(100).def()), proto::DISTRIBUTED_EPOCH));
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 3, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}, {20, 3}});
  proto::ClientHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_iteration_client_id(it.iteration_client_id());
  request.add_completed_splits(1);
  request.add_completed_splits(3);
  proto::ClientHeartbeatResponse response;
  REQUIRE(d.ClientHeartbeat(request, &response).ok());
  Shutdown(d, "w1:1");
  CHECK(Begins(Splits(d, it.iteration_id(), 2, 4, 1)) == BeginsAndSeqs{{10, 2}, {30, 4}, {40, 5}, {50, 6}});
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
  job_request.mutable_params()->set_dataset_id(Register(d, Dataset::Range(5).Repeat().def()));
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
  request.mutable_params()->set_dataset_id(Register(d, Dataset::Range(5).def()));
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

}  // namespace
}  // namespace sluice::dispatcher
