// The gauges /metrics computes from the dispatcher's state at each scrape:
// one function per gauge, on the state alone. StatusRpcs::ExportMetrics
// registers them and calls each under its lock.
#ifndef SLUICE_DISPATCHER_STATE_METRICS_H_
#define SLUICE_DISPATCHER_STATE_METRICS_H_

#include <string>

#include "dispatcher/dispatcher_state.h"
#include "service/metrics.h"

namespace sluice::dispatcher {

// A gauge: its name, help, labels, and its samples from the state.
struct StateGauge {
  std::string name;
  std::string help;
  std::vector<std::string> labels;
  MetricSamples (*samples)(const DispatcherState& state);
};

// sluice_workers, sluice_datasets, sluice_jobs, sluice_iterations{state},
// sluice_splits_awaiting_reissue, and per tenant (so that a tenant's
// /metrics shows its own use against its quotas, and only that)
// sluice_tenant_{datasets,definition_bytes,jobs,iterations}{tenant}.
const std::vector<StateGauge>& StateGauges();

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_STATE_METRICS_H_
