// The dispatcher's capabilities (issue 32): a client acts only in its own
// name, a task's elements go only to readers the dispatcher told of it,
// and explicit dataset ids cannot take the dispatcher's own.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "tests/testing/dispatcher_test_util.h"

namespace sluice::dispatcher {
namespace {

TEST_CASE("capabilities: a heartbeat needs the client's own secret", "[dispatcher][capabilities]") {
  DispatcherImpl d(TestConfig());
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1");
  const int64_t job = Job(d, Register(d, SquaresDef()));
  const proto::GetOrCreateIterationResponse victim = Iteration(d, job);
  const proto::GetOrCreateIterationResponse attacker = Iteration(d, Job(d, Register(d, SquaresDef())));
  REQUIRE(victim.client_secret().size() == 32);
  REQUIRE(victim.client_secret() != attacker.client_secret());

  // In the victim's name, claiming its task complete: with no secret, and
  // with the attacker's own.
  const int64_t victim_task = ClientBeat(d, victim.iteration_client_id()).tasks(0).task_id();
  for (const std::string& secret : {std::string(), attacker.client_secret()}) {
    proto::ClientHeartbeatRequest forged;
    forged.set_iteration_client_id(victim.iteration_client_id());
    forged.set_client_secret(secret);
    forged.add_completed_tasks(victim_task);
    forged.add_completed_splits(1);
    proto::ClientHeartbeatResponse response;
    const absl::Status status = Call(d, &DispatcherImpl::ClientHeartbeat, forged, &response);
    CHECK(status.code() == absl::StatusCode::kPermissionDenied);
    CHECK(std::string(status.message()) ==
          absl::StrCat("ClientHeartbeat: iteration client ", victim.iteration_client_id(),
                       " was not created by this caller: client_secret is ",
                       secret.empty() ? "missing" : "wrong", " (a client may act only in its own name)"));
    CHECK(response.tasks_size() == 0);
  }
  // Nothing was completed: the victim's task is still listed.
  const proto::ClientHeartbeatResponse beat = ClientBeat(d, victim.iteration_client_id());
  REQUIRE(beat.tasks_size() == 1);
  CHECK(beat.tasks(0).task_id() == victim_task);
}

TEST_CASE("capabilities: each task's read secret goes to its worker and its iteration's clients only",
          "[dispatcher][capabilities]") {
  DispatcherImpl d(TestConfig());
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const int64_t job = Job(d, Register(d, SquaresDef()));
  const proto::GetOrCreateIterationResponse it = Iteration(d, job);
  const proto::ClientHeartbeatResponse beat = ClientBeat(d, it.iteration_client_id());
  REQUIRE(beat.tasks_size() == 2);
  // The workers get the same secrets with their tasks.
  for (const std::string& address : {std::string("w1:1"), std::string("w2:2")}) {
    const proto::WorkerHeartbeatResponse worker = Heartbeat(d, address);
    REQUIRE(worker.new_tasks_size() == 1);
    const proto::TaskDef& def = worker.new_tasks(0);
    const auto listed =
        std::find_if(beat.tasks().begin(), beat.tasks().end(),
                     [&](const proto::TaskInfo& info) { return info.task_id() == def.task_id(); });
    REQUIRE(listed != beat.tasks().end());
    CHECK(def.read_secret().size() == 32);
    CHECK(def.read_secret() == listed->read_secret());
    // Not the client's secret of the same id.
    CHECK(def.read_secret() != d.ClientSecretOf(def.task_id()));
  }
  CHECK(beat.tasks(0).read_secret() != beat.tasks(1).read_secret());
}

TEST_CASE("capabilities: a worker's report of a task of another dispatcher incarnation is ignored",
          "[dispatcher][capabilities][incarnation]") {
  DispatcherImpl d(TestConfig());
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1");
  const proto::GetOrCreateIterationResponse it = Iteration(d, Job(d, Register(d, SquaresDef())));
  REQUIRE(ClientBeat(d, it.iteration_client_id()).tasks_size() == 1);
  const proto::WorkerHeartbeatResponse worker = Heartbeat(d, "w1:1");
  REQUIRE(worker.new_tasks_size() == 1);
  const proto::TaskDef& def = worker.new_tasks(0);
  REQUIRE(def.dispatcher_incarnation().size() == 32);
  auto report = [&](const std::string& incarnation) {
    proto::WorkerUpdatesRequest request;
    request.set_worker_address("w1:1");
    request.add_finished_tasks(def.task_id());
    request.set_dispatcher_incarnation(incarnation);
    proto::WorkerUpdatesResponse response;
    REQUIRE(Call(d, &DispatcherImpl::WorkerUpdates, request, &response).ok());
  };
  auto finished = [&] {
    proto::StatusSnapshot status;
    REQUIRE(Call(d, &DispatcherImpl::GetStatus, proto::GetStatusRequest(), &status).ok());
    REQUIRE(status.iterations_size() == 1);
    return status.iterations(0).finished();
  };
  // A late report from before a restart without state: its task id now
  // names this task, which must not end.
  report(std::string(32, '0'));
  CHECK(!finished());
  CHECK(ClientBeat(d, it.iteration_client_id()).tasks_size() == 1);
  report(def.dispatcher_incarnation());
  CHECK(finished());
}

TEST_CASE("capabilities: a numeric explicit dataset id is refused and never moves the counter",
          "[dispatcher][capabilities]") {
  DispatcherImpl d(TestConfig());
  REQUIRE(d.Start().ok());
  const std::string first = Register(d, SquaresDef());
  for (const std::string& id : {std::string("9223372036854775807"), std::string("1001"), std::string("0")}) {
    const absl::Status status = TryRegister(d, internal::DefinitionOf(Dataset::Range(3)), id);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(status.message()) ==
          absl::StrCat("GetOrRegisterDataset: dataset_id '", id,
                       "' is a number, and numbers are the dispatcher's own ids: name an explicit id with a "
                       "letter in it, or leave it empty to have one given"));
  }
  const absl::Status slash = TryRegister(d, internal::DefinitionOf(Dataset::Range(3)), "vision/corpus");
  CHECK(slash.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(slash.message()) ==
        "GetOrRegisterDataset: dataset_id 'vision/corpus' has a '/', which only a tenant's namespace puts "
        "there");
  // Named ids still work, and later registrations get the next number.
  CHECK(Register(d, internal::DefinitionOf(Dataset::Range(4)), "corpus-7") == "corpus-7");
  CHECK(Register(d, internal::DefinitionOf(Dataset::Range(5))) == std::to_string(std::stoll(first) + 1));
}

proto::JobParams NamedJob(const std::string& dataset_id, const std::string& name) {
  proto::JobParams params;
  params.set_dataset_id(dataset_id);
  params.set_processing_mode(proto::PARALLEL_EPOCHS);
  params.set_job_name(name);
  return params;
}

int64_t JobAs(DispatcherImpl& d, const Caller& caller, const proto::JobParams& params) {
  proto::GetOrCreateJobRequest request;
  *request.mutable_params() = params;
  return CallOk(d, &DispatcherImpl::GetOrCreateJob, request, caller).job_id();
}

TEST_CASE("tenants: each sees and names only its own datasets, jobs and iterations",
          "[dispatcher][tenants]") {
  DispatcherImpl d(TestConfig());
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1");
  const Caller a{.tenant = "a"};
  const Caller b{.tenant = "b"};
  const std::string a_data =
      CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(SquaresDef(), ""), a).dataset_id();
  const std::string b_data =
      CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(SquaresDef(), ""), b).dataset_id();
  // The same definition is a dataset of each tenant's own.
  CHECK(a_data != b_data);
  CHECK(CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(SquaresDef(), ""), a).dataset_id() ==
        a_data);
  // Explicit ids live in the tenant's namespace.
  CHECK(CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(SquaresDef(), "corpus"), a)
            .dataset_id() == "a/corpus");
  CHECK(CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(SquaresDef(), "corpus"), b)
            .dataset_id() == "b/corpus");

  // B cannot see A's dataset, nor make a job of it.
  proto::GetDatasetInfoRequest info;
  info.set_dataset_id(a_data);
  proto::GetDatasetInfoResponse info_response;
  const absl::Status hidden = Call(d, &DispatcherImpl::GetDatasetInfo, info, &info_response, b);
  CHECK(hidden.code() == absl::StatusCode::kNotFound);
  CHECK(std::string(hidden.message()) == absl::StrCat("unknown dataset id '", a_data, "'"));
  proto::GetOrCreateJobRequest steal;
  *steal.mutable_params() = NamedJob(a_data, "victim");
  proto::GetOrCreateJobResponse stolen;
  const absl::Status refused = Call(d, &DispatcherImpl::GetOrCreateJob, steal, &stolen, b);
  CHECK(refused.code() == absl::StatusCode::kNotFound);
  CHECK(std::string(refused.message()) == absl::StrCat("unknown dataset id '", a_data, "'"));

  // One job name, two tenants: two jobs.
  const int64_t a_job = JobAs(d, a, NamedJob(a_data, "shared"));
  const int64_t b_job = JobAs(d, b, NamedJob(b_data, "shared"));
  CHECK(a_job != b_job);
  CHECK(JobAs(d, a, NamedJob(a_data, "shared")) == a_job);
  // B cannot start an iteration of A's job.
  proto::GetOrCreateIterationRequest iteration;
  iteration.set_job_id(a_job);
  proto::GetOrCreateIterationResponse joined;
  const absl::Status no_job = Call(d, &DispatcherImpl::GetOrCreateIteration, iteration, &joined, b);
  CHECK(no_job.code() == absl::StatusCode::kNotFound);
  CHECK(std::string(no_job.message()) == absl::StrCat("unknown job ", a_job));
  CallOk(d, &DispatcherImpl::GetOrCreateIteration, iteration, a);

  // GetStatus shows B only its own; the cluster sees all.
  const proto::StatusSnapshot b_view = CallOk(d, &DispatcherImpl::GetStatus, proto::GetStatusRequest(), b);
  REQUIRE(b_view.datasets_size() == 2);
  CHECK(b_view.datasets(0).dataset_id() == b_data);
  CHECK(b_view.datasets(1).dataset_id() == "b/corpus");
  REQUIRE(b_view.jobs_size() == 1);
  CHECK(b_view.jobs(0).job_id() == b_job);
  CHECK(b_view.jobs(0).params().tenant() == "b");
  CHECK(b_view.iterations_size() == 0);
  CHECK(b_view.tasks_size() == 0);
  REQUIRE(b_view.workers_size() == 1);
  CHECK(b_view.workers(0).tasks_size() == 0);
  const proto::StatusSnapshot a_view = CallOk(d, &DispatcherImpl::GetStatus, proto::GetStatusRequest(), a);
  CHECK(a_view.iterations_size() == 1);
  CHECK(a_view.tasks_size() == 1);
  CHECK(a_view.workers(0).tasks_size() == 1);
  const proto::StatusSnapshot all = CallOk(d, &DispatcherImpl::GetStatus, proto::GetStatusRequest());
  CHECK(all.datasets_size() == 4);
  CHECK(all.jobs_size() == 2);
}

TEST_CASE("tenants: quotas bound each tenant and the whole, naming the quota", "[dispatcher][tenants]") {
  DispatcherConfig config = TestConfig();
  config.tenant_max_jobs = 2;
  config.max_jobs = 3;
  config.tenant_max_definition_bytes = 4096;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  const Caller a{.tenant = "a"};
  const Caller b{.tenant = "b"};
  const std::string a_data =
      CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(SquaresDef(), ""), a).dataset_id();
  const std::string b_data =
      CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(SquaresDef(), ""), b).dataset_id();
  JobAs(d, a, NamedJob(a_data, "one"));
  JobAs(d, a, NamedJob(a_data, "two"));
  proto::GetOrCreateJobRequest third;
  *third.mutable_params() = NamedJob(a_data, "three");
  proto::GetOrCreateJobResponse response;
  const absl::Status tenant_full = Call(d, &DispatcherImpl::GetOrCreateJob, third, &response, a);
  CHECK(tenant_full.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(tenant_full.message()) ==
        "GetOrCreateJob: tenant 'a' holds 2 jobs, past its quota tenant_max_jobs = 2 (finished jobs and the "
        "datasets they used are forgotten after job_retention_ms; an operator may raise the quota)");
  // B still has its share, until the total is reached.
  JobAs(d, b, NamedJob(b_data, "one"));
  *third.mutable_params() = NamedJob(b_data, "two");
  const absl::Status total_full = Call(d, &DispatcherImpl::GetOrCreateJob, third, &response, b);
  CHECK(total_full.code() == absl::StatusCode::kResourceExhausted);
  CHECK(
      std::string(total_full.message()) ==
      "GetOrCreateJob: tenant 'b' holds 1 jobs; that would pass the dispatcher's quota max_jobs = 3 for all "
      "tenants together (finished jobs and the datasets they used are forgotten after job_retention_ms; an "
      "operator may raise the quota)");
  // A definition past the tenant's bytes: refused, and nothing registered.
  const proto::DatasetDef large =
      internal::DefinitionOf(Dataset::FromTensors({Tensor(DType::kUInt8, {8192})}));
  proto::GetOrRegisterDatasetResponse registered;
  const absl::Status too_large =
      Call(d, &DispatcherImpl::GetOrRegisterDataset, Registration(large, ""), &registered, a);
  CHECK(too_large.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(too_large.message()),
             Catch::Matchers::StartsWith("GetOrRegisterDataset: tenant 'a' holds ") &&
                 Catch::Matchers::Contains(" bytes of definitions and this adds ") &&
                 Catch::Matchers::Contains(", past its quota tenant_max_definition_bytes = 4096"));
  CHECK(CallOk(d, &DispatcherImpl::GetStatus, proto::GetStatusRequest(), a).datasets_size() == 1);
}

}  // namespace
}  // namespace sluice::dispatcher
