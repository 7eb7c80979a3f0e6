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
  CHECK(std::string(total.message())
            .rfind("GetOrRegisterDataset: the dispatcher holds 3 datasets, past its quota max_datasets = 3 (",
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

}  // namespace sluice::dispatcher
