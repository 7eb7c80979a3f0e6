// Tests of the dispatcher against careless and hostile requests (issue
// 14): the state machine takes any repetition at a constant cost, an Apply
// that fails leaves the state as it was, request fields are range-checked
// at the RPC edge, and a worker's failed task fails its iteration.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/dataset_internal.h"
#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/dispatcher_state.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

proto::Update Registered() {
  proto::Update update;
  auto* u = update.mutable_register_dataset();
  u->set_dataset_id("d");
  u->set_fingerprint("f");
  *u->mutable_dataset() = internal::DefinitionOf(Dataset::Range(10));
  return update;
}

proto::Update Job(int64_t id) {
  proto::Update update;
  update.mutable_create_job()->set_job_id(id);
  update.mutable_create_job()->mutable_params()->set_dataset_id("d");
  update.mutable_create_job()->mutable_params()->set_processing_mode(proto::DISTRIBUTED_EPOCH);
  return update;
}

proto::Update Iteration(int64_t id, int64_t job, int64_t repetition) {
  proto::Update update;
  update.mutable_create_iteration()->set_iteration_id(id);
  update.mutable_create_iteration()->set_job_id(job);
  update.mutable_create_iteration()->set_repetition(repetition);
  return update;
}

TEST_CASE("dispatcher hardening: any repetition costs the same, and a refused one changes nothing",
          "[dispatcher][hardening]") {
  DispatcherState state;
  REQUIRE(state.Apply(Registered()).ok());
  REQUIRE(state.Apply(Job(1)).ok());
  // 2^62 threw from inside Apply (a resize), after the iteration was
  // already inserted; 2^26 allocated 512 MB, again on every replay.
  REQUIRE(state.Apply(Iteration(1, 1, int64_t{1} << 62)).ok());
  REQUIRE(state.Apply(Iteration(2, 1, int64_t{1} << 26)).ok());
  REQUIRE(state.Apply(Iteration(3, 1, 0)).ok());
  CHECK(state.FindJob(1)->iterations ==
        std::map<int64_t, int64_t>{{0, 3}, {int64_t{1} << 26, 2}, {int64_t{1} << 62, 1}});
  CHECK(state.FindIterationForRepetition(1, int64_t{1} << 62)->id == 1);
  CHECK(state.ToSnapshot().ByteSizeLong() < 1024);
  const std::string before = state.ToSnapshot().SerializeAsString();
  // The same repetition again, a negative one, an unknown job: refused,
  // and the state is as it was.
  CHECK(absl::IsFailedPrecondition(state.Apply(Iteration(4, 1, int64_t{1} << 62))));
  CHECK(absl::IsFailedPrecondition(state.Apply(Iteration(4, 1, -1))));
  CHECK(absl::IsFailedPrecondition(state.Apply(Iteration(4, 99, 0))));
  CHECK(state.ToSnapshot().SerializeAsString() == before);
  // A replay of the snapshot is the same state.
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(state.ToSnapshot());
  REQUIRE(restored.ok());
  CHECK(restored->ToSnapshot().SerializeAsString() == before);
}

// Random updates of every kind with boundary values: none throws, and
// each one that is refused leaves the state byte for byte as it was.
TEST_CASE("dispatcher hardening: random updates never throw, and refused ones change nothing",
          "[dispatcher][hardening]") {
  std::mt19937_64 random(20261123);
  const std::vector<int64_t> values = {0,         1,        2, 3, -1, int64_t{1} << 26, int64_t{1} << 62,
                                       INT64_MAX, INT64_MIN};
  auto value = [&] {
    return random() % 3 == 0 ? static_cast<int64_t>(random()) : values[random() % values.size()];
  };
  // Small ids often, so that updates meet the objects earlier ones made.
  auto small = [&] { return random() % 2 ? static_cast<int64_t>(random() % 6) : value(); };
  auto address = [&] { return std::string(random() % 2 ? "w:1" : "x:2"); };
  DispatcherState state;
  REQUIRE(state.Apply(Registered()).ok());
  int refused = 0;
  int applied = 0;
  for (int i = 0; i < 8000; ++i) {
    proto::Update update;
    switch (random() % 19) {
      case 0:
        update = Job(small());
        break;
      case 1:
        update = Iteration(small(), small(), value());
        update.mutable_create_iteration()->set_infinite(random() % 2);
        break;
      case 2:
        update.mutable_create_task()->set_task_id(small());
        update.mutable_create_task()->set_iteration_id(small());
        update.mutable_create_task()->set_worker_address(address());
        update.mutable_create_task()->set_starting_round(random() % 4 ? 0 : value());
        break;
      case 3:
        update.mutable_register_worker()->set_address(random() % 8 ? address() : "");
        break;
      case 4:
        update.mutable_acquire_iteration_client()->set_iteration_client_id(small());
        update.mutable_acquire_iteration_client()->set_iteration_id(small());
        update.mutable_acquire_iteration_client()->set_consumer_index(value());
        break;
      case 5:
        update.mutable_finish_task()->set_task_id(small());
        break;
      case 6: {
        auto* lease = update.mutable_lease_splits();
        lease->set_task_id(small());
        lease->set_request_id(value());
        lease->set_cursor(std::to_string(value()));
        lease->set_end_of_splits(random() % 2);
        for (int k = static_cast<int>(random() % 3); k >= 0; --k) {
          auto* split = lease->add_splits();
          split->set_seq(random() % 2 ? static_cast<int64_t>(random() % 8) : value());
          split->set_begin(value());
          split->set_end(value());
          split->set_count(random() % 2 ? value() % 5 : value());
          split->set_split_size(value() % 4);
        }
        break;
      }
      case 7:
        update.mutable_fail_iteration()->set_iteration_id(small());
        update.mutable_fail_iteration()->set_code(static_cast<int>(value() % 20));
        update.mutable_fail_iteration()->set_message("failed");
        break;
      case 8:
        update.mutable_remove_worker()->set_address(address());
        update.mutable_remove_worker()->set_reason("worker restarted");
        break;
      case 9:
        update.mutable_release_iteration_client()->set_iteration_client_id(small());
        break;
      case 10:
        update.mutable_garbage_collect_iteration()->set_iteration_id(small());
        break;
      case 11:
        update.mutable_complete_splits()->set_iteration_id(small());
        update.mutable_complete_splits()->add_seqs(random() % 2 ? static_cast<int64_t>(random() % 8)
                                                                : value());
        break;
      case 12:
        update.mutable_complete_task()->set_task_id(small());
        break;
      case 13:
        update.mutable_extend_round_horizon()->set_iteration_id(small());
        update.mutable_extend_round_horizon()->set_horizon(value());
        break;
      case 14:
        update.mutable_remove_job()->set_job_id(small());
        break;
      case 15:
        update.mutable_remove_dataset()->set_dataset_id(random() % 2 ? "d" : "e");
        break;
      case 16:
        update.mutable_lose_task()->set_task_id(small());
        update.mutable_lose_task()->set_reason("unreachable from clients for 10 ms");
        break;
      case 17:
        update.mutable_drain_worker()->set_address(address());
        break;
      default:
        update = Registered();
        update.mutable_register_dataset()->set_dataset_id(
            random() % 2 ? std::to_string(value()) : std::string(random() % 2 ? "d" : ""));
        break;
    }
    const std::string before = state.ToSnapshot().SerializeAsString();
    absl::Status status;
    REQUIRE_NOTHROW(status = state.Apply(update));
    if (!status.ok()) {
      ++refused;
      INFO(update.ShortDebugString());
      REQUIRE(state.ToSnapshot().SerializeAsString() == before);
    } else {
      ++applied;
    }
  }
  // Both paths are well trodden.
  CHECK(refused > 2000);
  CHECK(applied > 1000);
  // Whatever it went through, the state is one a snapshot restores.
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(state.ToSnapshot());
  REQUIRE(restored.ok());
  CHECK(restored->ToSnapshot().SerializeAsString() == state.ToSnapshot().SerializeAsString());
}

TEST_CASE("dispatcher hardening: leases with bad numbers and ids past int64 are refused",
          "[dispatcher][hardening]") {
  DispatcherState state;
  REQUIRE(state.Apply(Registered()).ok());
  // The next id after INT64_MAX would overflow.
  CHECK(absl::IsFailedPrecondition(state.Apply(Job(INT64_MAX))));
  CHECK(absl::IsFailedPrecondition(state.Apply(Job(0))));
  REQUIRE(state.Apply(Job(1)).ok());
  REQUIRE(state.Apply(Iteration(1, 1, 0)).ok());
  proto::Update worker;
  worker.mutable_register_worker()->set_address("w:1");
  REQUIRE(state.Apply(worker).ok());
  proto::Update task;
  task.mutable_create_task()->set_task_id(1);
  task.mutable_create_task()->set_iteration_id(1);
  task.mutable_create_task()->set_worker_address("w:1");
  REQUIRE(state.Apply(task).ok());
  const std::string before = state.ToSnapshot().SerializeAsString();
  auto lease = [&](int64_t seq, int64_t count, int64_t begin, int64_t end) {
    proto::Update update;
    update.mutable_lease_splits()->set_task_id(1);
    auto* split = update.mutable_lease_splits()->add_splits();
    split->set_seq(seq);
    split->set_count(count);
    split->set_begin(begin);
    split->set_end(end);
    if (count > 1) split->set_split_size(10);
    return state.Apply(update);
  };
  // A negative count moved the iteration's next seq back; a seq near
  // INT64_MAX overflowed it.
  const absl::Status negative = lease(1, -3, 0, 10);
  CHECK(negative.message() == "a lease of iteration 1 has seq 1, count -3, positions 0 to 10");
  CHECK(absl::IsFailedPrecondition(lease(INT64_MAX, 2, 0, 10)));
  CHECK(absl::IsFailedPrecondition(lease(0, 1, 0, 10)));
  CHECK(absl::IsFailedPrecondition(lease(1, 1, 10, 0)));
  CHECK(absl::IsFailedPrecondition(lease(1, 1, -5, 0)));
  proto::Update fail;
  fail.mutable_fail_iteration()->set_iteration_id(1);
  fail.mutable_fail_iteration()->set_code(99);
  CHECK(absl::IsFailedPrecondition(state.Apply(fail)));
  CHECK(state.ToSnapshot().SerializeAsString() == before);
  CHECK(lease(1, 2, 0, 20).ok());
  CHECK(state.FindIteration(1)->next_split_seq == 3);
}

TEST_CASE(
    "dispatcher hardening: a collected or failed iteration drops its leases, and an endless one keeps none",
    "[dispatcher][hardening]") {
  DispatcherState state;
  REQUIRE(state.Apply(Registered()).ok());
  REQUIRE(state.Apply(Job(1)).ok());
  proto::Update worker;
  worker.mutable_register_worker()->set_address("w:1");
  REQUIRE(state.Apply(worker).ok());
  const bool infinite = GENERATE(false, true);
  const bool collect = GENERATE(false, true);
  proto::Update iteration = Iteration(1, 1, 0);
  iteration.mutable_create_iteration()->set_infinite(infinite);
  REQUIRE(state.Apply(iteration).ok());
  proto::Update task;
  task.mutable_create_task()->set_task_id(1);
  task.mutable_create_task()->set_iteration_id(1);
  task.mutable_create_task()->set_worker_address("w:1");
  REQUIRE(state.Apply(task).ok());
  // range 3 / repeat: every split is [0, 3), so no two join into a run;
  // each lease was a map entry kept until the task ended, which an
  // endless read never does.
  for (int request = 1; request <= 500; ++request) {
    proto::Update update;
    auto* lease = update.mutable_lease_splits();
    lease->set_task_id(1);
    lease->set_request_id(request);
    for (int k = 0; k < 16; ++k) {
      auto* split = lease->add_splits();
      split->set_seq((request - 1) * 16 + k + 1);
      split->set_begin(0);
      split->set_end(3);
    }
    REQUIRE(state.Apply(update).ok());
  }
  CHECK(state.FindTask(1)->leases.size() == (infinite ? 0 : 8000));
  CHECK(state.FindTask(1)->last_split_response.size() == 16);
  CHECK(state.FindIteration(1)->next_split_seq == 8001);
  const size_t size = state.ToSnapshot().ByteSizeLong();
  CHECK(size < (infinite ? 1000 : 200000));
  proto::Update end;
  if (collect) {
    end.mutable_garbage_collect_iteration()->set_iteration_id(1);
  } else {
    end.mutable_fail_iteration()->set_iteration_id(1);
    end.mutable_fail_iteration()->set_code(static_cast<int>(absl::StatusCode::kInternal));
  }
  REQUIRE(state.Apply(end).ok());
  CHECK(state.FindTask(1)->leases.empty());
  CHECK(state.FindTask(1)->last_split_response.empty());
  CHECK(state.FindIteration(1)->finished);
  CHECK(state.ToSnapshot().ByteSizeLong() < 300);
  // Losing the worker now returns nothing to the iteration.
  proto::Update remove;
  remove.mutable_remove_worker()->set_address("w:1");
  REQUIRE(state.Apply(remove).ok());
  CHECK(state.FindIteration(1)->returned_splits.empty());
}

DispatcherConfig Config() {
  DispatcherConfig config;
  config.splits_per_request = 4;
  config.elements_per_split = 10;
  return config;
}

std::string Register(DispatcherImpl& d) {
  proto::GetOrRegisterDatasetRequest request;
  *request.mutable_version() = CurrentVersion();
  *request.mutable_dataset() = internal::DefinitionOf(Dataset::Range(100));
  proto::GetOrRegisterDatasetResponse response;
  REQUIRE(d.GetOrRegisterDataset(request, &response).ok());
  return response.dataset_id();
}

absl::Status TryJob(DispatcherImpl& d, const proto::JobParams& params, int64_t* job_id = nullptr) {
  proto::GetOrCreateJobRequest request;
  *request.mutable_version() = CurrentVersion();
  *request.mutable_params() = params;
  proto::GetOrCreateJobResponse response;
  absl::Status status = d.GetOrCreateJob(request, &response);
  if (job_id != nullptr) *job_id = response.job_id();
  return status;
}

absl::Status Beat(DispatcherImpl& d, const std::string& address, proto::WorkerHeartbeatResponse* response) {
  proto::WorkerHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_worker_address(address);
  return d.WorkerHeartbeat(request, response);
}

TEST_CASE("dispatcher hardening: request fields are checked at the RPC edge, naming field and value",
          "[dispatcher][hardening]") {
  DispatcherImpl d(Config());
  const std::string dataset = Register(d);
  proto::JobParams params;
  params.set_dataset_id(dataset);
  params.set_processing_mode(static_cast<proto::ProcessingMode>(99));
  absl::Status mode = TryJob(d, params);
  CHECK(absl::IsInvalidArgument(mode));
  CHECK(mode.message() ==
        "job: processing_mode 99 is not a processing mode (1: parallel_epochs, 2: distributed_epoch)");
  params.set_processing_mode(proto::PARALLEL_EPOCHS);
  params.set_sharding_policy(static_cast<proto::ShardingPolicy>(99));
  absl::Status policy = TryJob(d, params);
  CHECK(absl::IsInvalidArgument(policy));
  CHECK(policy.message() == "job: sharding_policy 99 is not a sharding policy (0 to 6)");
  params.set_sharding_policy(proto::SHARDING_POLICY_UNSET);
  params.add_static_workers("127.0.0.1:1");
  CHECK(TryJob(d, params).message() ==
        "job: static_workers is the dispatcher's to fill in, not the client's");

  proto::WorkerHeartbeatResponse beat;
  for (const std::string address : {"garbage", ":0", "grpc://w:1", "w:99999", "w\x01:1"}) {
    absl::Status status = Beat(d, address, &beat);
    INFO(address);
    CHECK(absl::IsInvalidArgument(status));
    // Control characters are shown escaped, so that the message cannot
    // forge a log line.
    const std::string shown = address == std::string("w\x01:1") ? "w\\x01:1" : address;
    CHECK(status.message() == "worker heartbeat: worker_address '" + shown + "' is not HOST:PORT");
  }

  // GetSplits with max_splits -5 handed out a split.
  REQUIRE(Beat(d, "w:1", &beat).ok());
  params.clear_static_workers();
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  int64_t job = 0;
  REQUIRE(TryJob(d, params, &job).ok());
  proto::GetOrCreateIterationRequest iteration_request;
  *iteration_request.mutable_version() = CurrentVersion();
  iteration_request.set_job_id(job);
  proto::GetOrCreateIterationResponse iteration;
  REQUIRE(d.GetOrCreateIteration(iteration_request, &iteration).ok());
  proto::GetSplitsRequest splits;
  *splits.mutable_version() = CurrentVersion();
  splits.set_iteration_id(iteration.iteration_id());
  splits.set_task_id(1);
  splits.set_max_splits(-5);
  proto::GetSplitsResponse answer;
  absl::Status negative = d.GetSplits(splits, &answer);
  CHECK(negative.message() == "GetSplits: max_splits must be in [0, 1048576], got -5");
  CHECK(answer.splits_size() == 0);
}

// Each request field out of range, as InvalidArgument naming the RPC, the
// field and the value; the state is untouched.
TEST_CASE("dispatcher hardening: every RPC's fields are range-checked before the state",
          "[dispatcher][hardening]") {
  DispatcherImpl d(Config());
  const std::string dataset = Register(d);
  proto::WorkerHeartbeatResponse beat;
  REQUIRE(Beat(d, "w:1", &beat).ok());
  proto::JobParams params;
  params.set_dataset_id(dataset);
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  int64_t job = 0;
  REQUIRE(TryJob(d, params, &job).ok());
  proto::GetStatusRequest status_request;
  *status_request.mutable_version() = CurrentVersion();
  auto state = [&] {
    proto::StatusSnapshot snapshot;
    REQUIRE(d.GetStatus(status_request, &snapshot).ok());
    return snapshot.SerializeAsString();
  };
  const std::string before = state();
  auto check = [&](const absl::Status& status, const std::string& message) {
    INFO(message);
    CHECK(absl::IsInvalidArgument(status));
    CHECK(status.message() == message);
  };

  params.set_num_consumers(-1);
  check(TryJob(d, params), "job: num_consumers must be in [0, 65536], got -1");
  params.set_num_consumers(int64_t{1} << 62);
  check(TryJob(d, params), "job: num_consumers must be in [0, 65536], got 4611686018427387904");
  params.set_num_consumers(0);
  params.set_dataset_id("");
  check(TryJob(d, params), "job: dataset_id is empty");
  params.set_dataset_id(dataset);
  params.set_job_name(std::string(2000, 'j'));
  check(TryJob(d, params), "job: job_name must be at most 1024 bytes, got 2000 bytes");

  proto::GetOrCreateIterationRequest iteration;
  *iteration.mutable_version() = CurrentVersion();
  proto::GetOrCreateIterationResponse created;
  iteration.set_job_id(0);
  check(d.GetOrCreateIteration(iteration, &created), "GetOrCreateIteration: job_id must be > 0, got 0");
  iteration.set_job_id(job);
  iteration.set_repetition(int64_t{1} << 62);
  check(d.GetOrCreateIteration(iteration, &created),
        "GetOrCreateIteration: repetition must be in [0, 2^40 = 1099511627776], got 4611686018427387904");
  iteration.set_repetition(0);
  iteration.set_consumer_index(-7);
  check(d.GetOrCreateIteration(iteration, &created),
        "GetOrCreateIteration: consumer_index must be in [0, 65536), got -7");
  iteration.set_consumer_index(0);
  // A skip list's worker address is checked as a worker's own is: no
  // newline to forge a log line, no megabyte of text.
  proto::WorkerPositions* positions = iteration.add_skip_positions();
  positions->set_worker_address("w:1\n[error] forged");
  positions->add_positions(0);
  positions->add_positions(5);
  check(d.GetOrCreateIteration(iteration, &created),
        "GetOrCreateIteration: skip_positions.worker_address 'w:1\\n[error] forged' is not HOST:PORT");
  iteration.clear_skip_positions();

  proto::ClientHeartbeatRequest client;
  *client.mutable_version() = CurrentVersion();
  proto::ClientHeartbeatResponse heard;
  client.set_iteration_client_id(-1);
  check(d.ClientHeartbeat(client, &heard), "ClientHeartbeat: iteration_client_id must be > 0, got -1");
  client.set_iteration_client_id(1);
  client.add_completed_tasks(0);
  check(d.ClientHeartbeat(client, &heard), "ClientHeartbeat: completed_tasks must be > 0, got 0");
  client.clear_completed_tasks();
  client.add_completed_splits(INT64_MIN);
  check(d.ClientHeartbeat(client, &heard),
        "ClientHeartbeat: completed_splits must be > 0, got -9223372036854775808");
  client.clear_completed_splits();
  // Bounds checked before anything else: a heartbeat of millions of ids
  // is refused whole.
  for (int64_t seq = 1; seq <= 65537; ++seq) client.add_completed_splits(seq);
  check(d.ClientHeartbeat(client, &heard),
        "ClientHeartbeat: completed_splits must be at most 65536 entries, got 65537");
  client.clear_completed_splits();
  for (int64_t id = 1; id <= 70000; ++id) client.add_completed_tasks(id);
  check(d.ClientHeartbeat(client, &heard),
        "ClientHeartbeat: completed_tasks must be at most 65536 entries, got 70000");
  client.clear_completed_tasks();
  for (int i = 0; i < 4097; ++i) client.add_unreachable_workers("w:1");
  check(d.ClientHeartbeat(client, &heard),
        "ClientHeartbeat: unreachable_workers must be at most 4096 entries, got 4097");
  client.clear_unreachable_workers();
  client.set_current_round(-2);
  check(d.ClientHeartbeat(client, &heard), "ClientHeartbeat: current_round must be >= 0, got -2");
  client.set_current_round(0);
  client.add_unreachable_workers("not an address");
  check(d.ClientHeartbeat(client, &heard),
        "ClientHeartbeat: unreachable_workers 'not an address' is not HOST:PORT");

  proto::ReleaseIterationClientRequest release;
  *release.mutable_version() = CurrentVersion();
  proto::ReleaseIterationClientResponse released;
  check(d.ReleaseIterationClient(release, &released),
        "ReleaseIterationClient: iteration_client_id must be > 0, got 0");

  proto::WorkerHeartbeatRequest worker;
  *worker.mutable_version() = CurrentVersion();
  worker.set_worker_address("w:1");
  worker.add_current_tasks(-4);
  check(d.WorkerHeartbeat(worker, &beat), "WorkerHeartbeat: current_tasks must be > 0, got -4");
  worker.clear_current_tasks();
  worker.add_tags("");
  check(d.WorkerHeartbeat(worker, &beat), "WorkerHeartbeat: tags is empty");
  worker.clear_tags();
  worker.set_worker_address("w :1");
  check(d.WorkerHeartbeat(worker, &beat), "worker heartbeat: worker_address 'w :1' is not HOST:PORT");

  proto::WorkerUpdatesRequest updates;
  *updates.mutable_version() = CurrentVersion();
  proto::WorkerUpdatesResponse updated;
  check(d.WorkerUpdates(updates, &updated), "WorkerUpdates: worker_address '' is not HOST:PORT");
  updates.set_worker_address("w:1");
  updates.add_finished_tasks(0);
  check(d.WorkerUpdates(updates, &updated), "WorkerUpdates: finished_tasks must be > 0, got 0");
  updates.clear_finished_tasks();
  auto* failure = updates.add_failed_tasks();
  failure->set_task_id(1);
  failure->set_code(0);
  check(d.WorkerUpdates(updates, &updated),
        "WorkerUpdates: failed_tasks.code must be an error code in [1, 16], got 0");
  failure->set_code(99);
  check(d.WorkerUpdates(updates, &updated),
        "WorkerUpdates: failed_tasks.code must be an error code in [1, 16], got 99");

  proto::WorkerShutdownRequest shutdown;
  *shutdown.mutable_version() = CurrentVersion();
  shutdown.set_worker_address("grpc://w:1");
  proto::WorkerShutdownResponse shut;
  check(d.WorkerShutdown(shutdown, &shut), "WorkerShutdown: worker_address 'grpc://w:1' is not HOST:PORT");

  proto::GetSplitsRequest splits;
  *splits.mutable_version() = CurrentVersion();
  proto::GetSplitsResponse answer;
  splits.set_task_id(1);
  check(d.GetSplits(splits, &answer), "GetSplits: iteration_id must be > 0, got 0");
  splits.set_iteration_id(1);
  splits.set_task_id(-1);
  check(d.GetSplits(splits, &answer), "GetSplits: task_id must be > 0, got -1");
  splits.set_task_id(1);
  splits.set_request_id(-1);
  check(d.GetSplits(splits, &answer), "GetSplits: request_id must be >= 0, got -1");

  proto::GetDatasetInfoRequest info;
  *info.mutable_version() = CurrentVersion();
  proto::GetDatasetInfoResponse described;
  check(d.GetDatasetInfo(info, &described), "GetDatasetInfo: dataset_id is empty");
  proto::GetOrRegisterDatasetRequest registration;
  *registration.mutable_version() = CurrentVersion();
  *registration.mutable_dataset() = internal::DefinitionOf(Dataset::Range(5));
  registration.set_dataset_id(std::string(5000, 'x'));
  proto::GetOrRegisterDatasetResponse registered;
  check(d.GetOrRegisterDataset(registration, &registered),
        "GetOrRegisterDataset: dataset_id must be at most 1024 bytes, got 5000 bytes");
  CHECK(state() == before);
}

// A worker may finish only its own tasks, and a client complete only the
// tasks of its own iteration.
TEST_CASE("dispatcher hardening: a worker cannot finish another's task", "[dispatcher][hardening]") {
  DispatcherImpl d(Config());
  proto::WorkerHeartbeatResponse beat;
  REQUIRE(Beat(d, "w:1", &beat).ok());
  REQUIRE(Beat(d, "x:2", &beat).ok());
  proto::JobParams params;
  params.set_dataset_id(Register(d));
  params.set_processing_mode(proto::PARALLEL_EPOCHS);
  int64_t job = 0;
  REQUIRE(TryJob(d, params, &job).ok());
  proto::GetOrCreateIterationRequest iteration_request;
  *iteration_request.mutable_version() = CurrentVersion();
  iteration_request.set_job_id(job);
  proto::GetOrCreateIterationResponse iteration;
  REQUIRE(d.GetOrCreateIteration(iteration_request, &iteration).ok());
  proto::WorkerUpdatesRequest updates;
  *updates.mutable_version() = CurrentVersion();
  updates.set_worker_address("x:2");
  updates.add_finished_tasks(1);  // w:1's
  updates.add_finished_tasks(2);
  proto::WorkerUpdatesResponse updated;
  REQUIRE(d.WorkerUpdates(updates, &updated).ok());
  proto::ClientHeartbeatRequest client;
  *client.mutable_version() = CurrentVersion();
  client.set_iteration_client_id(iteration.iteration_client_id());
  client.set_client_secret(d.ClientSecretOf(client.iteration_client_id()));
  proto::ClientHeartbeatResponse heard;
  REQUIRE(d.ClientHeartbeat(client, &heard).ok());
  CHECK_FALSE(heard.iteration_finished());  // task 1 on w:1 still runs
}

TEST_CASE("dispatcher hardening: a worker's failed task fails its iteration with the worker's words",
          "[dispatcher][hardening]") {
  DispatcherImpl d(Config());
  proto::WorkerHeartbeatResponse beat;
  REQUIRE(Beat(d, "w:1", &beat).ok());
  REQUIRE(Beat(d, "x:2", &beat).ok());
  proto::JobParams params;
  params.set_dataset_id(Register(d));
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  params.set_job_name("shared");
  int64_t job = 0;
  REQUIRE(TryJob(d, params, &job).ok());
  proto::GetOrCreateIterationRequest iteration_request;
  *iteration_request.mutable_version() = CurrentVersion();
  iteration_request.set_job_id(job);
  proto::GetOrCreateIterationResponse iteration;
  REQUIRE(d.GetOrCreateIteration(iteration_request, &iteration).ok());
  CHECK_FALSE(iteration.already_finished());

  proto::WorkerUpdatesRequest updates;
  *updates.mutable_version() = CurrentVersion();
  updates.set_worker_address("w:1");
  updates.add_finished_tasks(1);
  auto* failure = updates.add_failed_tasks();
  failure->set_task_id(1);
  failure->set_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
  failure->set_message("task 1: the pipeline ran out of memory");
  proto::WorkerUpdatesResponse updated;
  REQUIRE(d.WorkerUpdates(updates, &updated).ok());

  proto::ClientHeartbeatRequest client;
  *client.mutable_version() = CurrentVersion();
  client.set_iteration_client_id(iteration.iteration_client_id());
  client.set_client_secret(d.ClientSecretOf(client.iteration_client_id()));
  proto::ClientHeartbeatResponse heard;
  REQUIRE(d.ClientHeartbeat(client, &heard).ok());
  CHECK(heard.error_code() == static_cast<int>(absl::StatusCode::kResourceExhausted));
  CHECK(heard.error_message() == "task 1 on worker w:1: task 1: the pipeline ran out of memory");
  CHECK(heard.iteration_finished());
  // The other worker drops its task of the failed iteration, and gets no
  // splits for it.
  proto::WorkerHeartbeatRequest current;
  *current.mutable_version() = CurrentVersion();
  current.set_worker_address("x:2");
  current.add_current_tasks(2);
  REQUIRE(d.WorkerHeartbeat(current, &beat).ok());
  CHECK(std::vector<int64_t>(beat.tasks_to_delete().begin(), beat.tasks_to_delete().end()) ==
        std::vector<int64_t>{2});
  proto::GetSplitsRequest splits;
  *splits.mutable_version() = CurrentVersion();
  splits.set_iteration_id(iteration.iteration_id());
  splits.set_task_id(2);
  proto::GetSplitsResponse answer;
  REQUIRE(d.GetSplits(splits, &answer).ok());
  CHECK(answer.splits_size() == 0);
  CHECK(answer.end_of_splits());
  // A consumer joining the repetition later hears that it is over.
  proto::GetOrCreateIterationResponse late;
  REQUIRE(d.GetOrCreateIteration(iteration_request, &late).ok());
  CHECK(late.already_finished());
}

// A pipeline that crashes its worker (the bad_alloc, before
// workers contained it) was handed to the next worker forever, and the
// dispatcher grew to 3 GB of leases. Each "restart" here is a heartbeat
// with a new incarnation, as from a worker started again after a crash.
TEST_CASE("dispatcher hardening: an iteration that keeps losing short-lived tasks fails naming them",
          "[dispatcher][hardening]") {
  DispatcherImpl d(Config());
  auto beat = [&](const std::string& address, const std::string& incarnation,
                  const std::vector<int64_t>& current = {}) {
    proto::WorkerHeartbeatRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_worker_address(address);
    request.set_incarnation(incarnation);
    for (int64_t id : current) request.add_current_tasks(id);
    proto::WorkerHeartbeatResponse response;
    REQUIRE(d.WorkerHeartbeat(request, &response).ok());
    return response;
  };
  beat("w:1", "0");
  beat("x:2", "0");
  proto::GetOrRegisterDatasetRequest registration;
  *registration.mutable_version() = CurrentVersion();
  *registration.mutable_dataset() = internal::DefinitionOf(Dataset::Range(3).Repeat());
  proto::GetOrRegisterDatasetResponse registered;
  REQUIRE(d.GetOrRegisterDataset(registration, &registered).ok());
  proto::JobParams params;
  params.set_dataset_id(registered.dataset_id());
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  int64_t job = 0;
  REQUIRE(TryJob(d, params, &job).ok());
  proto::GetOrCreateIterationRequest iteration_request;
  *iteration_request.mutable_version() = CurrentVersion();
  iteration_request.set_job_id(job);
  proto::GetOrCreateIterationResponse iteration;
  REQUIRE(d.GetOrCreateIteration(iteration_request, &iteration).ok());
  proto::ClientHeartbeatRequest client;
  *client.mutable_version() = CurrentVersion();
  client.set_iteration_client_id(iteration.iteration_client_id());
  client.set_client_secret(d.ClientSecretOf(client.iteration_client_id()));
  auto heard = [&] {
    proto::ClientHeartbeatResponse response;
    REQUIRE(d.ClientHeartbeat(client, &response).ok());
    return response;
  };
  SECTION("workers that crash at once, four times in a row") {
    // Tasks 1 (w:1) and 2 (x:2); each restart loses the worker's task and
    // gives it a new one: 3, 4, 5.
    beat("w:1", "1");
    beat("x:2", "1");
    beat("w:1", "2");
    CHECK(heard().error_code() == 0);
    CHECK(heard().tasks_size() == 2);
    beat("x:2", "2");
    const proto::ClientHeartbeatResponse failed = heard();
    CHECK(failed.error_code() == static_cast<int>(absl::StatusCode::kInternal));
    CHECK_THAT(failed.error_message(),
               Catch::Matchers::StartsWith(
                   "iteration 1 lost its tasks 4 times in a row, each within 10000 ms of starting, so its "
                   "pipeline most likely crashes the workers (see their logs): task 1 on w:1 (worker "
                   "restarted) after "));
    CHECK_THAT(failed.error_message(),
               Catch::Matchers::Contains("; task 4 on x:2 (worker restarted) after "));
    CHECK(failed.iteration_finished());
    CHECK(failed.tasks_size() == 0);
    // Nothing of it is handed on: the workers drop what they hold, and a
    // worker back again gets no task in it.
    const proto::WorkerHeartbeatResponse dropped = beat("w:1", "2", {5});
    CHECK(std::vector<int64_t>(dropped.tasks_to_delete().begin(), dropped.tasks_to_delete().end()) ==
          std::vector<int64_t>{5});
    CHECK(beat("w:1", "3").new_tasks_size() == 0);
  }
  SECTION("workers shut down and back are not crashes") {
    for (int round = 1; round <= 3; ++round) {
      for (const std::string address : {"w:1", "x:2"}) {
        proto::WorkerShutdownRequest shutdown;
        *shutdown.mutable_version() = CurrentVersion();
        shutdown.set_worker_address(address);
        proto::WorkerShutdownResponse shut;
        REQUIRE(d.WorkerShutdown(shutdown, &shut).ok());
        beat(address, std::to_string(round));
      }
    }
    CHECK(heard().error_code() == 0);
    CHECK(heard().tasks_size() == 2);
  }
}

// A trainer paused past client_timeout_ms (evaluation, a checkpoint; the
// issue's SIGSTOP for 3 s against 1000 ms) died with "unknown iteration
// client".
TEST_CASE("dispatcher hardening: a client released for silence is taken back while its iteration lives",
          "[dispatcher][hardening]") {
  DispatcherConfig config = Config();
  config.client_timeout_ms = 200;
  config.worker_timeout_ms = 500;  // the monitor wakes every 50 ms
  config.job_gc_timeout_ms = GENERATE(60000, 300);
  config.job_retention_ms = 600000;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());  // the monitor that releases silent clients
  proto::WorkerHeartbeatResponse beat;
  REQUIRE(Beat(d, "w:1", &beat).ok());
  proto::JobParams params;
  params.set_dataset_id(Register(d));
  params.set_processing_mode(proto::PARALLEL_EPOCHS);
  int64_t job = 0;
  REQUIRE(TryJob(d, params, &job).ok());
  proto::GetOrCreateIterationRequest iteration_request;
  *iteration_request.mutable_version() = CurrentVersion();
  iteration_request.set_job_id(job);
  proto::GetOrCreateIterationResponse iteration;
  REQUIRE(d.GetOrCreateIteration(iteration_request, &iteration).ok());
  // Silent for over three client timeouts (and, in the second run, past
  // the iteration's collection), while the worker heartbeats on.
  for (int i = 0; i < 9; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(Beat(d, "w:1", &beat).ok());
  }
  proto::GetStatusRequest status_request;
  *status_request.mutable_version() = CurrentVersion();
  proto::StatusSnapshot before;
  REQUIRE(d.GetStatus(status_request, &before).ok());
  REQUIRE(before.iterations_size() == 1);
  CHECK(before.iterations(0).num_clients() == 0);  // released
  proto::ClientHeartbeatRequest client;
  *client.mutable_version() = CurrentVersion();
  client.set_iteration_client_id(iteration.iteration_client_id());
  client.set_client_secret(d.ClientSecretOf(client.iteration_client_id()));
  proto::ClientHeartbeatResponse heard;
  const absl::Status status = d.ClientHeartbeat(client, &heard);
  if (config.job_gc_timeout_ms == 60000) {
    INFO(status.ToString());
    REQUIRE(status.ok());
    // Taken back: the iteration has its client again.
    proto::StatusSnapshot snapshot;
    REQUIRE(d.GetStatus(status_request, &snapshot).ok());
    REQUIRE(snapshot.iterations_size() == 1);
    CHECK(snapshot.iterations(0).num_clients() == 1);
    REQUIRE(heard.tasks_size() == 1);
    CHECK(heard.tasks(0).worker_address() == "w:1");
    CHECK_FALSE(heard.iteration_finished());
  } else {
    CHECK(absl::IsNotFound(status));
    CHECK(
        status.message() ==
        "iteration client 1 was released after 200 ms without a heartbeat (client_timeout_ms), and its "
        "iteration 1 "
        "was then collected after 300 ms without clients (job_gc_timeout_ms): raise client_timeout_ms on the "
        "dispatcher for trainers that pause longer (evaluation, checkpoints)");
  }
}

// Every anonymous `sluice read` left a dataset, job, iteration and task
// behind for good (five 50 MB from_tensors datasets: 592 -> 1,349 MB).
TEST_CASE("dispatcher hardening: finished jobs and unused datasets are collected",
          "[dispatcher][hardening]") {
  DispatcherConfig config = Config();
  config.worker_timeout_ms = 500;  // the monitor wakes every 30 ms
  config.job_gc_timeout_ms = 300;
  config.job_retention_ms = 300;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  proto::WorkerHeartbeatResponse beat;
  REQUIRE(Beat(d, "w:1", &beat).ok());
  proto::JobParams params;
  params.set_dataset_id(Register(d));
  params.set_processing_mode(proto::PARALLEL_EPOCHS);
  int64_t job = 0;
  REQUIRE(TryJob(d, params, &job).ok());
  proto::GetOrCreateIterationRequest iteration_request;
  *iteration_request.mutable_version() = CurrentVersion();
  iteration_request.set_job_id(job);
  proto::GetOrCreateIterationResponse iteration;
  REQUIRE(d.GetOrCreateIteration(iteration_request, &iteration).ok());
  proto::GetStatusRequest status_request;
  *status_request.mutable_version() = CurrentVersion();
  auto status = [&] {
    proto::StatusSnapshot snapshot;
    REQUIRE(d.GetStatus(status_request, &snapshot).ok());
    return snapshot;
  };
  // While it is read, and while its task runs, nothing goes.
  auto wait_beating = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      REQUIRE(Beat(d, "w:1", &beat).ok());
    }
  };
  proto::ClientHeartbeatRequest client;
  *client.mutable_version() = CurrentVersion();
  client.set_iteration_client_id(iteration.iteration_client_id());
  client.set_client_secret(d.ClientSecretOf(client.iteration_client_id()));
  proto::ClientHeartbeatResponse heard;
  for (int i = 0; i < 6; ++i) {
    wait_beating(1);
    REQUIRE(d.ClientHeartbeat(client, &heard).ok());
  }
  CHECK(status().jobs_size() == 1);
  // The read ends: the worker finishes the task and the client leaves.
  proto::WorkerUpdatesRequest finished;
  *finished.mutable_version() = CurrentVersion();
  finished.set_worker_address("w:1");
  finished.add_finished_tasks(1);
  proto::WorkerUpdatesResponse updated;
  REQUIRE(d.WorkerUpdates(finished, &updated).ok());
  proto::ReleaseIterationClientRequest release;
  *release.mutable_version() = CurrentVersion();
  release.set_iteration_client_id(iteration.iteration_client_id());
  release.set_client_secret(iteration.client_secret());
  proto::ReleaseIterationClientResponse released;
  REQUIRE(d.ReleaseIterationClient(release, &released).ok());
  // The job goes after job_gc_timeout_ms, then its dataset after as long.
  wait_beating(12);
  const proto::StatusSnapshot after = status();
  CHECK(after.datasets_size() == 0);
  CHECK(after.jobs_size() == 0);
  CHECK(after.iterations_size() == 0);
  CHECK(after.tasks_size() == 0);
  CHECK(after.workers_size() == 1);
  // The same definition registers again, as new.
  CHECK(Register(d) == "1001");
}

// Issue item: five 50 MB from_tensors datasets grew the work dir to 260 MB
// for good. A collected dataset leaves the journal at the next snapshot.
TEST_CASE("dispatcher hardening: a collected dataset leaves the work dir at the next snapshot",
          "[dispatcher][hardening]") {
  testing::TempDir dir;
  DispatcherConfig config = Config();
  config.work_dir = dir.File("work");
  config.snapshot_interval = 1;  // every update writes a snapshot
  config.worker_timeout_ms = 500;
  config.job_gc_timeout_ms = 300;
  config.job_retention_ms = 300;
  auto work_dir_bytes = [&] {
    int64_t bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(config.work_dir)) {
      bytes += static_cast<int64_t>(entry.file_size());
    }
    return bytes;
  };
  proto::GetStatusRequest status_request;
  *status_request.mutable_version() = CurrentVersion();
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    proto::GetOrRegisterDatasetRequest request;
    *request.mutable_version() = CurrentVersion();
    // 4 MiB of int64s, and a worker to keep the dispatcher's clock going.
    *request.mutable_dataset() =
        internal::DefinitionOf(Dataset::FromTensors({Tensor(DType::kInt64, {int64_t{1} << 19})}));
    proto::GetOrRegisterDatasetResponse registered;
    REQUIRE(d.GetOrRegisterDataset(request, &registered).ok());
    CHECK(work_dir_bytes() > (int64_t{4} << 20));
    proto::WorkerHeartbeatResponse beat;
    proto::StatusSnapshot snapshot;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      REQUIRE(Beat(d, "w:1", &beat).ok());
      snapshot.Clear();
      REQUIRE(d.GetStatus(status_request, &snapshot).ok());
    } while (snapshot.datasets_size() > 0 && std::chrono::steady_clock::now() < give_up);
    REQUIRE(snapshot.datasets_size() == 0);
    // The heartbeat after the removal snapshots the state without it.
    REQUIRE(Beat(d, "w:2", &beat).ok());
    d.WaitForSnapshot();
    CHECK(work_dir_bytes() < 64 * 1024);
  }
  // A restart from the work dir knows no dataset.
  DispatcherImpl restarted(config);
  REQUIRE(restarted.Start().ok());
  proto::StatusSnapshot after;
  REQUIRE(restarted.GetStatus(status_request, &after).ok());
  CHECK(after.datasets_size() == 0);
  CHECK(after.workers_size() == 2);
}

}  // namespace
}  // namespace sluice::dispatcher
