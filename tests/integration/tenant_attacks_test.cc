// Issue 32's attacks by a client that holds the client token (the role
// every trainer on a shared cluster holds), each against real daemons
// with auth on and an honest reader beside it, which must end with every
// element exactly once: a forged heartbeat in another reader's name (3),
// reading or draining any task by its id (4), an explicit dataset id that
// moves the dispatcher's counter (5), and a heartbeat whose round
// overflows the horizon (6).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "service/channel_security.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/security_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using testing::TestCluster;

using testing::kClientToken;
using testing::kClusterToken;
using testing::ScopedClientSecurity;
using testing::TokenFlags;

std::chrono::system_clock::time_point Soon() {
  return std::chrono::system_clock::now() + std::chrono::seconds(5);
}

// The attacks land while the read is under way.
absl::Status PacedRead(const Dataset& dataset, std::vector<int64_t>* values) {
  return testing::ReadToEnd(dataset, values, /*pause_every=*/500);
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = i;
  return values;
}

TEST_CASE("tenant attacks: forged heartbeats and task reads by id are refused while the victim reads exactly",
          "[service][security][tenants]") {
  testing::TempDir dir;
  const std::vector<std::string> tokens = TokenFlags(dir);
  ScopedClientSecurity client({.token = kClientToken});
  TestCluster cluster({.num_workers = 2, .dispatcher_args = tokens, .worker_args = tokens});
  const ChannelSecurity as_client{.token = kClientToken};
  auto dispatcher =
      proto::DispatcherService::NewStub(MakeSecureChannel(cluster.DispatcherAddress(), as_client));

  constexpr int64_t kElements = 40000;
  std::vector<int64_t> values;
  absl::Status read_status;
  std::atomic<bool> read_done = false;
  std::thread victim([&] {
    read_status = PacedRead(
        Dataset::Range(kElements).ReadFromService({.service = cluster.ServiceUrl(),
                                                   .processing_mode = ProcessingMode::kDistributedEpoch,
                                                   .job_name = "victim",
                                                   .exactly_once = true,
                                                   .max_outstanding_requests = 64}),
        &values);
    read_done = true;
  });

  // The attacker lists the tasks (GetStatus shows ids, never secrets) and
  // tries each attack while the victim reads.
  int forged_heartbeats = 0;
  int stolen_reads = 0;
  std::vector<std::string> refusals;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((!read_done || forged_heartbeats == 0) && std::chrono::steady_clock::now() < give_up) {
    proto::StatusSnapshot status;
    {
      grpc::ClientContext context;
      context.set_deadline(Soon());
      proto::GetStatusRequest request;
      *request.mutable_version() = CurrentVersion();
      REQUIRE(dispatcher->GetStatus(&context, request, &status).ok());
    }
    if (status.tasks_size() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    // (3) and (6): the victim's id is among the first few, sequential ones.
    for (int64_t client_id = 1; client_id <= 3; ++client_id) {
      proto::ClientHeartbeatRequest forged;
      *forged.mutable_version() = CurrentVersion();
      forged.set_iteration_client_id(client_id);
      for (const proto::TaskInfo& task : status.tasks()) forged.add_completed_tasks(task.task_id());
      for (int64_t seq = 1; seq <= 1000; ++seq) forged.add_completed_splits(seq);
      forged.set_current_round(std::numeric_limits<int64_t>::max());
      forged.set_client_secret(forged_heartbeats % 2 == 0 ? "" : std::string(32, 'a'));
      grpc::ClientContext context;
      context.set_deadline(Soon());
      proto::ClientHeartbeatResponse response;
      const grpc::Status refused = dispatcher->ClientHeartbeat(&context, forged, &response);
      ++forged_heartbeats;
      CHECK(refused.error_code() == grpc::StatusCode::PERMISSION_DENIED);
      CHECK(response.tasks_size() == 0);
      refusals.push_back(refused.error_message());
    }
    // (4): each task, from its worker, without the read secret.
    for (const proto::TaskInfo& task : status.tasks()) {
      auto worker = proto::WorkerService::NewStub(MakeSecureChannel(task.worker_address(), as_client));
      proto::GetElementsRequest get;
      *get.mutable_version() = CurrentVersion();
      get.set_task_id(task.task_id());
      get.set_max_elements(1000);
      get.set_task_secret(stolen_reads % 2 == 0 ? "" : std::string(32, '0'));
      grpc::ClientContext context;
      context.set_deadline(Soon());
      proto::GetElementsResponse response;
      const grpc::Status refused = worker->GetElements(&context, get, &response);
      ++stolen_reads;
      // Nothing, answered as for a task that runs nowhere (finding 8:
      // the answer must not tell where another's task runs).
      grpc::ClientContext nowhere_context;
      nowhere_context.set_deadline(Soon());
      proto::GetElementsResponse nowhere;
      get.set_task_id(int64_t{1} << 40);
      const grpc::Status unknown = worker->GetElements(&nowhere_context, get, &nowhere);
      CHECK(refused.ok());
      CHECK(unknown.ok());
      CHECK(response.SerializeAsString() == nowhere.SerializeAsString());
      CHECK(response.elements_size() == 0);
      CHECK(response.frame().empty());
      CHECK_FALSE(response.end_of_sequence());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  victim.join();
  INFO(read_status.ToString());
  REQUIRE(read_status.ok());
  std::sort(values.begin(), values.end());
  CHECK(values == Iota(kElements));
  CHECK(forged_heartbeats > 0);
  CHECK(stolen_reads > 0);
  for (const std::string& refusal : refusals) {
    CHECK_THAT(refusal, Catch::Matchers::Contains("was not created by this caller: client_secret is") &&
                            Catch::Matchers::Contains("(a client may act only in its own name)"));
  }
}

TEST_CASE("tenant attacks: an explicit numeric dataset id is refused and locks no one out",
          "[service][security][tenants]") {
  testing::TempDir dir;
  const std::vector<std::string> tokens = TokenFlags(dir);
  ScopedClientSecurity client({.token = kClientToken});
  TestCluster cluster(
      {.num_workers = 1,
       .dispatcher_args = {tokens[0], tokens[1], tokens[2], tokens[3], "--work-dir", dir.File("work")},
       .worker_args = tokens});
  const ChannelSecurity as_client{.token = kClientToken};
  auto dispatcher =
      proto::DispatcherService::NewStub(MakeSecureChannel(cluster.DispatcherAddress(), as_client));
  proto::GetOrRegisterDatasetRequest attack;
  *attack.mutable_version() = CurrentVersion();
  *attack.mutable_dataset() = internal::DefinitionOf(Dataset::Range(1));
  attack.set_dataset_id("9223372036854775807");
  grpc::ClientContext context;
  context.set_deadline(Soon());
  proto::GetOrRegisterDatasetResponse response;
  const grpc::Status refused = dispatcher->GetOrRegisterDataset(&context, attack, &response);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(
      refused.error_message() ==
      "GetOrRegisterDataset: dataset_id '9223372036854775807' is a number, and numbers are the dispatcher's "
      "own ids: name an explicit id with a letter in it, or leave it empty to have one given");
  // Honest registrations go on, before and after a restart.
  std::vector<int64_t> values;
  REQUIRE(
      testing::ReadToEnd(Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == Iota(5));
  cluster.RestartDispatcher();
  values.clear();
  REQUIRE(
      testing::ReadToEnd(Dataset::Range(7).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == Iota(7));
}

TEST_CASE("tenants: two tenants' tokens read their own jobs of one name, and neither sees the other's",
          "[service][security][tenants]") {
  testing::TempDir dir;
  const std::vector<std::string> flags = testing::TenantFlags(dir, {"alpha", "beta"});
  // The cluster token while the test cluster waits for its workers.
  std::optional<TestCluster> started;
  {
    ScopedClientSecurity as_cluster({.token = kClusterToken});
    started.emplace(TestCluster::Options{.num_workers = 2, .dispatcher_args = flags, .worker_args = flags});
  }
  TestCluster& cluster = *started;
  const ChannelSecurity alpha{.token = "token-of-alpha-0123456789"};
  const ChannelSecurity beta{.token = "token-of-beta-0123456789"};

  // Each reads its own job "train", at the same time.
  std::vector<int64_t> alpha_values;
  std::vector<int64_t> beta_values;
  absl::Status alpha_status;
  absl::Status beta_status;
  {
    ScopedClientSecurity as_alpha(alpha);
    alpha_status =
        PacedRead(Dataset::Range(3000).ReadFromService({.service = cluster.ServiceUrl(),
                                                        .processing_mode = ProcessingMode::kDistributedEpoch,
                                                        .job_name = "train"}),
                  &alpha_values);
  }
  {
    ScopedClientSecurity as_beta(beta);
    beta_status = PacedRead(Dataset::Range(50).Map("square").ReadFromService(
                                {.service = cluster.ServiceUrl(),
                                 .processing_mode = ProcessingMode::kDistributedEpoch,
                                 .job_name = "train"}),
                            &beta_values);
  }
  INFO(alpha_status.ToString() << " / " << beta_status.ToString());
  REQUIRE(alpha_status.ok());
  REQUIRE(beta_status.ok());
  std::sort(alpha_values.begin(), alpha_values.end());
  std::sort(beta_values.begin(), beta_values.end());
  CHECK(alpha_values == Iota(3000));
  std::vector<int64_t> squares;
  for (int64_t i = 0; i < 50; ++i) squares.push_back(i * i);
  CHECK(beta_values == squares);

  // Beta's GetStatus shows beta's dataset and job only; alpha's job id is
  // unknown to beta.
  auto status_as = [&](const ChannelSecurity& security) {
    auto stub = proto::DispatcherService::NewStub(MakeSecureChannel(cluster.DispatcherAddress(), security));
    grpc::ClientContext context;
    context.set_deadline(Soon());
    proto::GetStatusRequest request;
    *request.mutable_version() = CurrentVersion();
    proto::StatusSnapshot snapshot;
    REQUIRE(stub->GetStatus(&context, request, &snapshot).ok());
    return snapshot;
  };
  const proto::StatusSnapshot alpha_view = status_as(alpha);
  const proto::StatusSnapshot beta_view = status_as(beta);
  REQUIRE(alpha_view.jobs_size() == 1);
  REQUIRE(beta_view.jobs_size() == 1);
  CHECK(alpha_view.jobs(0).params().tenant() == "alpha");
  CHECK(beta_view.jobs(0).params().tenant() == "beta");
  CHECK(alpha_view.jobs(0).job_id() != beta_view.jobs(0).job_id());
  CHECK(beta_view.datasets_size() == 1);
  for (const proto::TaskInfo& task : beta_view.tasks())
    CHECK(task.iteration_id() != alpha_view.tasks(0).iteration_id());
  const proto::StatusSnapshot cluster_view = status_as({.token = kClusterToken});
  CHECK(cluster_view.jobs_size() == 2);

  auto beta_stub = proto::DispatcherService::NewStub(MakeSecureChannel(cluster.DispatcherAddress(), beta));
  grpc::ClientContext context;
  context.set_deadline(Soon());
  proto::GetOrCreateIterationRequest join;
  *join.mutable_version() = CurrentVersion();
  join.set_job_id(alpha_view.jobs(0).job_id());
  join.set_repetition(1);
  proto::GetOrCreateIterationResponse joined;
  const grpc::Status refused = beta_stub->GetOrCreateIteration(&context, join, &joined);
  CHECK(refused.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(refused.error_message() == absl::StrCat("unknown job ", alpha_view.jobs(0).job_id()));
  // A token that is no tenant's is refused.
  const ChannelSecurity stranger{.token = "token-of-nobody-0123456789"};
  auto stranger_stub =
      proto::DispatcherService::NewStub(MakeSecureChannel(cluster.DispatcherAddress(), stranger));
  grpc::ClientContext stranger_context;
  stranger_context.set_deadline(Soon());
  proto::GetStatusRequest request;
  *request.mutable_version() = CurrentVersion();
  proto::StatusSnapshot snapshot;
  const grpc::Status unknown = stranger_stub->GetStatus(&stranger_context, request, &snapshot);
  CHECK(unknown.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(unknown.error_message() == "GetStatus needs the client token and the call carried a wrong one");

  // A worker's GetStatus lists every tenant's tasks there: the cluster's only.
  const std::string worker = absl::StrCat("127.0.0.1:", cluster.WorkerPort(0));
  auto worker_status = [&](const ChannelSecurity& security, proto::WorkerStatusResponse* answer) {
    auto stub = proto::WorkerService::NewStub(MakeSecureChannel(worker, security));
    grpc::ClientContext worker_context;
    worker_context.set_deadline(Soon());
    const proto::WorkerStatusRequest status_request;
    return stub->GetStatus(&worker_context, status_request, answer);
  };
  proto::WorkerStatusResponse worker_view;
  const grpc::Status tenant_refused = worker_status(alpha, &worker_view);
  CHECK(tenant_refused.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(tenant_refused.error_message() ==
        "GetStatus is a worker's RPC: it needs the cluster token, and the call carried the client token");
  CHECK(worker_status({.token = kClusterToken}, &worker_view).ok());
  CHECK(worker_view.address() == worker);
}

TEST_CASE(
    "tenant attacks: squatting a named exactly_once job's epoch with skip_splits is refused, and restores "
    "still work",
    "[service][security][tenants]") {
  testing::TempDir dir;
  const std::vector<std::string> tokens = TokenFlags(dir);
  ScopedClientSecurity client({.token = kClientToken});
  TestCluster cluster(
      {.num_workers = 2,
       .dispatcher_args = {tokens[0], tokens[1], tokens[2], tokens[3], "--elements-per-split", "16"},
       .worker_args = tokens});
  constexpr int64_t kEpoch = 4000;
  const Dataset victim =
      Dataset::Range(kEpoch).ReadFromService({.service = cluster.ServiceUrl(),
                                              .processing_mode = ProcessingMode::kDistributedEpoch,
                                              .job_name = "victim",
                                              .exactly_once = true});
  // The attacker makes the victim's job and tries to create its epoch 0
  // with every split but the first skipped.
  auto dispatcher = proto::DispatcherService::NewStub(
      MakeSecureChannel(cluster.DispatcherAddress(), {.token = kClientToken}));
  proto::GetOrRegisterDatasetRequest registration;
  *registration.mutable_version() = CurrentVersion();
  *registration.mutable_dataset() = internal::DefinitionOf(Dataset::Range(kEpoch));
  proto::GetOrRegisterDatasetResponse registered;
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    REQUIRE(dispatcher->GetOrRegisterDataset(&context, registration, &registered).ok());
  }
  proto::GetOrCreateJobRequest job_request;
  *job_request.mutable_version() = CurrentVersion();
  job_request.mutable_params()->set_dataset_id(registered.dataset_id());
  job_request.mutable_params()->set_processing_mode(proto::DISTRIBUTED_EPOCH);
  job_request.mutable_params()->set_job_name("victim");
  job_request.mutable_params()->set_exactly_once(true);
  proto::GetOrCreateJobResponse job;
  {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    REQUIRE(dispatcher->GetOrCreateJob(&context, job_request, &job).ok());
  }
  // A real restore key, for another repetition: creating repetition 1000
  // of the job gives it.
  std::string key_of_1000;
  {
    proto::GetOrCreateIterationRequest other;
    *other.mutable_version() = CurrentVersion();
    other.set_job_id(job.job_id());
    other.set_repetition(1000);
    grpc::ClientContext context;
    context.set_deadline(Soon());
    proto::GetOrCreateIterationResponse created;
    REQUIRE(dispatcher->GetOrCreateIteration(&context, other, &created).ok());
    key_of_1000 = created.restore_key();
    CHECK(key_of_1000.size() == 32);
  }
  struct Squat {
    std::string key;
    std::string saved_job;
    std::string message;
  };
  const std::string tail =
      " (a state saved by a Sluice release before restore keys, or on another cluster, cannot be restored "
      "where "
      "auth is on)";
  const std::string prefix =
      absl::StrCat("GetOrCreateIteration: skip_splits or skip_positions (a restored read) for job ",
                   job.job_id(), " ('victim') need the restore_key ");
  const std::vector<Squat> squats = {
      {"", "victim", prefix + "that the saved state holds, and there is none" + tail},
      {key_of_1000, "victim",
       prefix + "of a state saved from repetition 0 of this job on this cluster, and this one is not" + tail},
      {key_of_1000, "",
       absl::StrCat("GetOrCreateIteration: a read saved from job '' cannot restore into job ", job.job_id(),
                    " ('victim')")},
  };
  for (const Squat& attempt : squats) {
    proto::GetOrCreateIterationRequest squat;
    *squat.mutable_version() = CurrentVersion();
    squat.set_job_id(job.job_id());
    squat.set_repetition(0);
    squat.add_skip_splits(1);
    squat.add_skip_splits(int64_t{1} << 40);
    squat.set_split_layout("elements_per_split=16");
    squat.set_restore_key(attempt.key);
    squat.set_restore_job_name(attempt.saved_job);
    grpc::ClientContext context;
    context.set_deadline(Soon());
    proto::GetOrCreateIterationResponse squatted;
    const grpc::Status refused = dispatcher->GetOrCreateIteration(&context, squat, &squatted);
    CHECK(refused.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(refused.error_message() == attempt.message);
  }
  // The victim reads its whole epoch, saves midway through the next, and
  // restores on a dispatcher restarted without its journal: the restore
  // key comes from the cluster's, so it still proves the state.
  std::vector<int64_t> values;
  REQUIRE(testing::ReadToEnd(victim, &values).ok());
  std::sort(values.begin(), values.end());
  CHECK(values == Iota(kEpoch));
  std::vector<int64_t> second;
  std::string state;
  {
    Iterator iterator = testing::MakeOrFail(victim);
    testing::Take(iterator, 1500, &second);
    state = testing::SaveOrFail(iterator);
  }
  cluster.RestartDispatcher();
  Iterator restored = testing::RestoreOrFail(victim, state);
  testing::Take(restored, -1, &second);
  std::sort(second.begin(), second.end());
  CHECK(second == Iota(kEpoch));
}

}  // namespace
}  // namespace sluice
