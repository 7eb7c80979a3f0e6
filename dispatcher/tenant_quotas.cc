#include "dispatcher/tenant_quotas.h"

#include "absl/strings/str_cat.h"

namespace sluice::dispatcher {
namespace {

struct Usage {
  int64_t total = 0;
  int64_t tenant = 0;
};

// `what` counted in all and for `tenant`, plus `adding`, against both
// limits: ResourceExhausted naming the quota passed.
absl::Status CheckUsage(absl::string_view rpc, absl::string_view what, const std::string& tenant, Usage usage,
                        int64_t adding, absl::string_view quota, int64_t limit, int64_t tenant_limit) {
  const bool total_passed = usage.total + adding > limit;
  if (!total_passed && usage.tenant + adding <= tenant_limit) return absl::OkStatus();
  const std::string holder =
      total_passed ? "the dispatcher holds" : absl::StrCat("tenant '", tenant, "' holds");
  return absl::ResourceExhaustedError(
      absl::StrCat(rpc, ": ", holder, " ", total_passed ? usage.total : usage.tenant, " ", what,
                   adding > 1 ? absl::StrCat(" and this adds ", adding) : "", ", past its quota ",
                   total_passed ? "" : "tenant_", quota, " = ", total_passed ? limit : tenant_limit,
                   " (finished jobs and the datasets they used are forgotten after job_retention_ms; an "
                   "operator may raise "
                   "the quota)"));
}

}  // namespace

absl::Status CheckDatasetQuota(const DispatcherState& state, const DispatcherConfig& config,
                               const proto::DatasetDef& def, const std::string& tenant) {
  Usage datasets;
  Usage bytes;
  for (const auto& [id, dataset] : state.datasets()) {
    const int64_t size = static_cast<int64_t>(dataset.def.ByteSizeLong());
    ++datasets.total;
    bytes.total += size;
    if (dataset.tenant == tenant) {
      ++datasets.tenant;
      bytes.tenant += size;
    }
  }
  if (absl::Status s = CheckUsage("GetOrRegisterDataset", "datasets", tenant, datasets, 1, "max_datasets",
                                  config.max_datasets, config.tenant_max_datasets);
      !s.ok()) {
    return s;
  }
  return CheckUsage("GetOrRegisterDataset", "bytes of definitions", tenant, bytes,
                    static_cast<int64_t>(def.ByteSizeLong()), "max_definition_bytes",
                    config.max_definition_bytes, config.tenant_max_definition_bytes);
}

absl::Status CheckJobQuota(const DispatcherState& state, const DispatcherConfig& config,
                           const std::string& tenant) {
  Usage jobs;
  for (const auto& [id, job] : state.jobs()) {
    ++jobs.total;
    if (job.params.tenant() == tenant) ++jobs.tenant;
  }
  return CheckUsage("GetOrCreateJob", "jobs", tenant, jobs, 1, "max_jobs", config.max_jobs,
                    config.tenant_max_jobs);
}

absl::Status CheckIterationQuota(const DispatcherState& state, const DispatcherConfig& config,
                                 const std::string& tenant) {
  Usage iterations;
  for (const auto& [id, iteration] : state.iterations()) {
    ++iterations.total;
    if (state.FindJob(iteration.job_id)->params.tenant() == tenant) ++iterations.tenant;
  }
  return CheckUsage("GetOrCreateIteration", "iterations", tenant, iterations, 1, "max_iterations",
                    config.max_iterations, config.tenant_max_iterations);
}

}  // namespace sluice::dispatcher
