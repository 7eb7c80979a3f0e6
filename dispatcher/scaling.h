// The autoscaler's (autoscaler.h) edges: what it reads from the state at
// each evaluation, and how its advice is shown, filtered for the caller:
// ScalingAdvice in GetStatus, the "scaling" object of /status.json and the
// gauges on /metrics. A tenant sees its own jobs' rows only; the totals and
// the advice line are the cluster's, for the cluster token and /metrics.
// Reads only; the dispatcher calls these under DispatcherCore's mutex.
#ifndef SLUICE_DISPATCHER_SCALING_H_
#define SLUICE_DISPATCHER_SCALING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/json_writer.h"
#include "dispatcher/autoscaler.h"
#include "dispatcher/dispatcher_state.h"
#include "service/metrics.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// Every job with a running iteration (not finished, collected or failed):
// its clients, its live tasks, and the live workers not draining among
// theirs.
std::vector<Autoscaler::JobInput> ScalingInputs(const DispatcherState& state);
// Live workers not draining.
int64_t ServingWorkers(const DispatcherState& state);

void FillScalingAdvice(const Autoscaler::Advice& advice, const Caller& caller, proto::ScalingAdvice* out);
// "scaling": {"jobs": [...], and for a caller who sees all, the totals and
// "advice"}.
void WriteScalingJson(const Autoscaler::Advice& advice, const Caller& caller, JsonWriter& json);

// A gauge of the advice: its name, help, labels and samples.
struct ScalingGauge {
  std::string name;
  std::string help;
  std::vector<std::string> labels;
  MetricSamples (*samples)(const Autoscaler::Advice& advice);
};
// sluice_recommended_workers, sluice_trainer_wait_fraction and
// sluice_worker_utilisation (the cluster's: no tenant sees them), and per
// job sluice_job_{recommended_workers,wait_fraction,utilisation}{tenant,
// job_id,job_name}. None before the first evaluation.
const std::vector<ScalingGauge>& ScalingGauges();

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_SCALING_H_
