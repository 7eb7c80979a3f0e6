#include "dispatcher/tenant_quotas.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"

namespace sluice::dispatcher {
namespace {

void RegisterDataset(DispatcherState& state, const std::string& id, const std::string& tenant) {
  proto::Update update;
  auto* dataset = update.mutable_register_dataset();
  dataset->set_dataset_id(id);
  dataset->set_fingerprint("fp-" + id);
  dataset->mutable_dataset()->add_steps()->mutable_range()->set_stop(10);
  dataset->set_tenant(tenant);
  REQUIRE(state.Apply(update).ok());
}

void CreateJob(DispatcherState& state, int64_t job_id, const std::string& dataset_id,
               const std::string& tenant) {
  proto::Update update;
  auto* job = update.mutable_create_job();
  job->set_job_id(job_id);
  job->mutable_params()->set_dataset_id(dataset_id);
  job->mutable_params()->set_tenant(tenant);
  REQUIRE(state.Apply(update).ok());
}

// An iteration restored with `ranges` ranges of skip_splits, apart.
void CreateRestoredIteration(DispatcherState& state, int64_t iteration_id, int64_t job_id, int64_t ranges) {
  proto::Update update;
  auto* iteration = update.mutable_create_iteration();
  iteration->set_iteration_id(iteration_id);
  iteration->set_job_id(job_id);
  for (int64_t i = 0; i < ranges; ++i) {
    iteration->add_skip_splits(1 + 3 * i);
    iteration->add_skip_splits(2 + 3 * i);
  }
  REQUIRE(state.Apply(update).ok());
}

}  // namespace

TEST_CASE("Quotas count the whole dispatcher and each tenant, and name the one passed",
          "[dispatcher][quotas]") {
  DispatcherState state;
  RegisterDataset(state, "d1", "a");
  RegisterDataset(state, "d2", "a");
  RegisterDataset(state, "d3", "b");
  DispatcherConfig config;
  config.tenant_max_datasets = 2;
  proto::DatasetDef def;
  def.add_steps()->mutable_range()->set_stop(10);

  CHECK(CheckDatasetQuota(state, config, def, "b").ok());
  const absl::Status a = CheckDatasetQuota(state, config, def, "a");
  CHECK(absl::IsResourceExhausted(a));
  CHECK(std::string(a.message()) ==
        "GetOrRegisterDataset: tenant 'a' holds 2 datasets, past its quota tenant_max_datasets = 2 "
        "(finished jobs and the datasets they used are forgotten after job_retention_ms; an operator may "
        "raise the quota)");

  config.max_datasets = 3;
  const absl::Status total = CheckDatasetQuota(state, config, def, "b");
  CHECK(absl::IsResourceExhausted(total));
  CHECK(
      std::string(total.message())
          .rfind("GetOrRegisterDataset: tenant 'b' holds 1 datasets; that would pass the dispatcher's quota "
                 "max_datasets = 3 for all tenants together (",
                 0) == 0);

  // Definition bytes count what the new definition adds.
  DispatcherConfig bytes;
  bytes.tenant_max_definition_bytes = 3 * static_cast<int64_t>(def.ByteSizeLong());
  CHECK(CheckDatasetQuota(state, bytes, def, "a").ok());
  bytes.tenant_max_definition_bytes -= 1;
  const absl::Status over = CheckDatasetQuota(state, bytes, def, "a");
  CHECK(std::string(over.message())
            .rfind(absl::StrCat("GetOrRegisterDataset: tenant 'a' holds ", 2 * def.ByteSizeLong(),
                                " bytes of definitions and this adds ", def.ByteSizeLong(),
                                ", past its quota tenant_max_definition_bytes = ", 3 * def.ByteSizeLong() - 1,
                                " ("),
                   0) == 0);

  CreateJob(state, 1, "d1", "a");
  DispatcherConfig jobs;
  jobs.tenant_max_jobs = 1;
  CHECK(CheckJobQuota(state, jobs, "b").ok());
  CHECK(std::string(CheckJobQuota(state, jobs, "a").message())
            .rfind("GetOrCreateJob: tenant 'a' holds 1 jobs, past its quota tenant_max_jobs = 1 (", 0) == 0);
  CHECK(CheckIterationQuota(state, jobs, "a").ok());
}

TEST_CASE("Restored reads' skip lists count toward the tenant's quota and the total",
          "[dispatcher][quotas]") {
  DispatcherState state;
  RegisterDataset(state, "d1", "alice");
  RegisterDataset(state, "d2", "bob");
  CreateJob(state, 1, "d1", "alice");
  CreateJob(state, 2, "d2", "bob");
  CreateRestoredIteration(state, 1, 1, 300);
  CHECK(RestoreNumbers(*state.FindIteration(1)) == 600);
  DispatcherConfig config;
  config.max_restore_numbers = 2000;
  ApplyTenantShares(2, &config);
  CHECK(config.tenant_max_restore_numbers == 1000);
  CHECK(CheckRestoreQuota(state, config, "alice", 400).ok());
  const absl::Status alice = CheckRestoreQuota(state, config, "alice", 402);
  CHECK(absl::IsResourceExhausted(alice));
  CHECK(std::string(alice.message()) ==
        "GetOrCreateIteration: tenant 'alice' holds 600 numbers of restored reads' skip lists and this adds "
        "402, past its quota tenant_max_restore_numbers = 1000 (finished jobs and the datasets they used are "
        "forgotten after job_retention_ms; an operator may raise the quota)");
  // Bob's share is his own; the message shows him nothing of alice's.
  CreateRestoredIteration(state, 2, 2, 450);
  CHECK(CheckRestoreQuota(state, config, "bob", 100).ok());
  config.max_restore_numbers = 1599;
  const absl::Status total = CheckRestoreQuota(state, config, "bob", 100);
  CHECK(std::string(total.message())
            .rfind(
                "GetOrCreateIteration: tenant 'bob' holds 900 numbers of restored reads' skip lists and this "
                "adds 100; that would pass the dispatcher's quota max_restore_numbers = 1599 for all tenants "
                "together (",
                0) == 0);
  // A read that restores nothing is never refused.
  CHECK(CheckRestoreQuota(state, config, "bob", 0).ok());
  proto::GetOrCreateIterationRequest request;
  request.add_skip_splits(1);
  request.add_skip_splits(9);
  request.add_skip_positions()->add_positions(4);
  CHECK(RestoreNumbers(request) == 3);
}

TEST_CASE("Tenant quotas left 0 are the totals divided among the tenants, and set ones stay",
          "[dispatcher][quotas]") {
  DispatcherConfig config;
  config.max_datasets = 10;
  config.max_jobs = 2;
  config.tenant_max_iterations = 7;
  ApplyTenantShares(3, &config);
  CHECK(config.tenant_max_datasets == 3);
  CHECK(config.tenant_max_jobs == 1);  // never 0: each tenant may hold one
  CHECK(config.tenant_max_iterations == 7);
  CHECK(config.tenant_max_definition_bytes == (int64_t{256} << 20) / 3);
  DispatcherConfig single;
  ApplyTenantShares(0, &single);  // no auth: one tenant, the whole
  CHECK(single.tenant_max_datasets == single.max_datasets);
  // Unapplied (a DispatcherImpl built in a test), 0 means the total.
  DispatcherState state;
  RegisterDataset(state, "d1", "a");
  DispatcherConfig unapplied;
  unapplied.max_datasets = 2;
  proto::DatasetDef def;
  def.add_steps()->mutable_range()->set_stop(10);
  CHECK(CheckDatasetQuota(state, unapplied, def, "a").ok());
}

}  // namespace sluice::dispatcher
