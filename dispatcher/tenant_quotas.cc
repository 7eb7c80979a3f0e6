#include "dispatcher/tenant_quotas.h"

#include "absl/strings/str_cat.h"

namespace sluice::dispatcher {
namespace {

struct Usage {
  int64_t total = 0;
  int64_t tenant = 0;
};

// `what` counted in all and for `tenant`, plus `adding`, against both
// limits: ResourceExhausted naming the quota passed. The message shows the
// tenant its own usage only, never the others'. A tenant limit of 0 (no
// shares applied) is the total.
absl::Status CheckUsage(absl::string_view rpc, absl::string_view what, const std::string& tenant, Usage usage,
                        int64_t adding, absl::string_view quota, int64_t limit, int64_t tenant_limit) {
  if (tenant_limit <= 0) tenant_limit = limit;
  const bool total_passed = usage.total + adding > limit;
  if (!total_passed && usage.tenant + adding <= tenant_limit) return absl::OkStatus();
  // The single client token is the tenant "".
  const std::string holds =
      absl::StrCat(tenant.empty() ? "the clients hold " : absl::StrCat("tenant '", tenant, "' holds "),
                   usage.tenant, " ", what, adding > 1 ? absl::StrCat(" and this adds ", adding) : "");
  const std::string passed = total_passed
                                 ? absl::StrCat("; that would pass the dispatcher's quota ", quota, " = ",
                                                limit, " for all tenants together")
                                 : absl::StrCat(", past its quota tenant_", quota, " = ", tenant_limit);
  return absl::ResourceExhaustedError(
      absl::StrCat(rpc, ": ", holds, passed,
                   " (finished jobs and the datasets they used are forgotten after job_retention_ms; an "
                   "operator may raise the quota)"));
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

absl::Status CheckRestoreQuota(const DispatcherState& state, const DispatcherConfig& config,
                               const std::string& tenant, int64_t adding, absl::string_view rpc) {
  if (adding == 0) return absl::OkStatus();
  Usage numbers;
  for (const auto& [id, iteration] : state.iterations()) {
    const int64_t held = RestoreNumbers(iteration);
    numbers.total += held;
    if (state.FindJob(iteration.job_id)->params.tenant() == tenant) numbers.tenant += held;
  }
  return CheckUsage(
      rpc,
      rpc == "GetOrCreateIteration"
          ? "numbers of restored reads' skip lists"
          : "numbers of skip lists (restored reads', and positions shared reads took of held splits)",
      tenant, numbers, adding, "max_restore_numbers", config.max_restore_numbers,
      config.tenant_max_restore_numbers);
}

int64_t RestoreNumbers(const DispatcherState::Iteration& iteration) {
  int64_t numbers = 2 * static_cast<int64_t>(iteration.skip_splits.size());
  for (const auto& [address, ranges] : iteration.skip_positions)
    numbers += 2 * static_cast<int64_t>(ranges.size());
  // A shared read's held splits' taken positions are skip lists too.
  for (const auto& [seq, ranges] : iteration.taken_positions)
    numbers += 1 + 2 * static_cast<int64_t>(ranges.size());
  return numbers;
}

int64_t RestoreNumbers(const proto::GetOrCreateIterationRequest& request) {
  int64_t numbers = request.skip_splits_size();
  for (const proto::WorkerPositions& worker : request.skip_positions()) numbers += worker.positions_size();
  return numbers;
}

}  // namespace sluice::dispatcher
