#include "dispatcher/state_metrics.h"

#include <map>
#include <vector>

namespace sluice::dispatcher {
namespace {

MetricSamples One(size_t value) { return MetricSamples{{{}, static_cast<double>(value)}}; }

MetricSamples ByTenant(const std::map<std::string, double>& values) {
  MetricSamples samples;
  for (const auto& [tenant, value] : values) samples.push_back({{tenant}, value});
  return samples;
}

MetricSamples IterationsByState(const DispatcherState& state) {
  double active = 0, finished = 0, collected = 0, failed = 0;
  for (const auto& [id, iteration] : state.iterations()) {
    if (iteration.error_code != 0) {
      ++failed;
    } else if (iteration.collected) {
      ++collected;
    } else if (iteration.finished) {
      ++finished;
    } else {
      ++active;
    }
  }
  return MetricSamples{
      {{"active"}, active}, {{"finished"}, finished}, {{"collected"}, collected}, {{"failed"}, failed}};
}

MetricSamples SplitsAwaitingReissue(const DispatcherState& state) {
  double returned = 0;
  for (const auto& [id, iteration] : state.iterations()) {
    for (const auto& [seq, run] : iteration.returned_splits) returned += static_cast<double>(run.count);
  }
  return MetricSamples{{{}, returned}};
}

MetricSamples SplitsHeld(const DispatcherState& state) {
  double held = 0;
  for (const auto& [id, iteration] : state.iterations())
    held += static_cast<double>(CountSplits(iteration.held_splits));
  return MetricSamples{{{}, held}};
}

MetricSamples ReportsAwaited(const DispatcherState& state) {
  double awaited = 0;
  for (const auto& [id, iteration] : state.iterations()) {
    awaited += static_cast<double>(iteration.awaiting_reports.size());
  }
  return MetricSamples{{{}, awaited}};
}

MetricSamples TenantDatasets(const DispatcherState& state) {
  std::map<std::string, double> count;
  for (const auto& [id, dataset] : state.datasets()) ++count[dataset.tenant];
  return ByTenant(count);
}

MetricSamples TenantDefinitionBytes(const DispatcherState& state) {
  std::map<std::string, double> bytes;
  for (const auto& [id, dataset] : state.datasets()) {
    bytes[dataset.tenant] += static_cast<double>(dataset.def.ByteSizeLong());
  }
  return ByTenant(bytes);
}

MetricSamples TenantJobs(const DispatcherState& state) {
  std::map<std::string, double> count;
  for (const auto& [id, job] : state.jobs()) ++count[job.params.tenant()];
  return ByTenant(count);
}

MetricSamples TenantIterations(const DispatcherState& state) {
  std::map<std::string, double> count;
  for (const auto& [id, iteration] : state.iterations())
    ++count[state.FindJob(iteration.job_id)->params.tenant()];
  return ByTenant(count);
}

}  // namespace

const std::vector<StateGauge>& StateGauges() {
  static const auto* gauges = new std::vector<StateGauge>{
      {"sluice_workers",
       "workers registered and heard from",
       {},
       [](const DispatcherState& state) { return One(state.workers().size()); }},
      {"sluice_datasets",
       "datasets registered",
       {},
       [](const DispatcherState& state) { return One(state.datasets().size()); }},
      {"sluice_jobs", "jobs", {}, [](const DispatcherState& state) { return One(state.jobs().size()); }},
      {"sluice_iterations", "iterations by state", {"state"}, IterationsByState},
      {"sluice_splits_awaiting_reissue",
       "splits of lost tasks waiting to be handed out again",
       {},
       SplitsAwaitingReissue},
      {"sluice_splits_held",
       "splits of lost tasks of shared exactly_once reads, held until their consumers say which of their "
       "elements they took",
       {},
       SplitsHeld},
      {"sluice_held_split_reports_awaited",
       "consumers of shared exactly_once reads whose report of the elements they took of held splits is "
       "awaited",
       {},
       ReportsAwaited},
      {"sluice_tenant_datasets", "datasets registered by a tenant", {"tenant"}, TenantDatasets},
      {"sluice_tenant_definition_bytes",
       "bytes of the definitions a tenant registered",
       {"tenant"},
       TenantDefinitionBytes},
      {"sluice_tenant_jobs", "jobs of a tenant", {"tenant"}, TenantJobs},
      {"sluice_tenant_iterations", "iterations of a tenant's jobs", {"tenant"}, TenantIterations},
  };
  return *gauges;
}

}  // namespace sluice::dispatcher
