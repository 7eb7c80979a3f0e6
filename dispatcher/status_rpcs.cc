// StatusRpcs: the status RPCs, its status page and its gauges: each takes
// the lock and hands the state to dispatcher/status_views.h or
// dispatcher/state_metrics.h, which do the work.
#include "dispatcher/status_rpcs.h"

#include <chrono>
#include <string>

#include "dispatcher/scaling.h"
#include "dispatcher/state_metrics.h"
#include "dispatcher/status_views.h"
#include "pipeline/builder.h"
#include "service/grpc_util.h"

namespace sluice::dispatcher {

StatusRpcs::StatusRpcs(DispatcherCore& core) : core_(core) {}

StatusSources StatusRpcs::StatusSourcesLocked() const {
  return StatusSources{
      .state = core_.state_,
      .workers = core_.worker_activity_,
      .scaling = &core_.autoscaler_.advice(),
      .splits_total = [this](const DispatcherState::Iteration& iteration, const proto::JobParams& params)
                          ABSL_NO_THREAD_SAFETY_ANALYSIS { return SplitsTotal(iteration, params); }};
}

absl::Status StatusRpcs::GetWorkers(const proto::GetWorkersRequest& request,
                                    proto::GetWorkersResponse* response, const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&core_.mu_);
  FillWorkers(StatusSourcesLocked(), caller, response);
  return absl::OkStatus();
}

absl::Status StatusRpcs::GetStatus(const proto::GetStatusRequest& request, proto::StatusSnapshot* response,
                                   const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&core_.mu_);
  FillStatusSnapshot(StatusSourcesLocked(), caller, response);
  // None before the autoscaler's first evaluation.
  if (core_.autoscaler_.advice().recommended_workers > 0) {
    FillScalingAdvice(core_.autoscaler_.advice(), caller, response->mutable_scaling());
  }
  return absl::OkStatus();
}

std::string StatusRpcs::StatusJson(const Caller& caller) {
  const int64_t now_ms = UnixMillis();
  const double uptime_seconds = std::chrono::duration<double>(Clock::now() - core_.created_).count();
  absl::MutexLock lock(&core_.mu_);
  return dispatcher::StatusJson(StatusSourcesLocked(), caller, now_ms, uptime_seconds);
}

int64_t StatusRpcs::SplitsTotal(const DispatcherState::Iteration& iteration,
                                const proto::JobParams& params) const {
  if (params.processing_mode() != proto::DISTRIBUTED_EPOCH || iteration.infinite) return -1;
  auto source = core_.source_splits_.find(params.dataset_id());
  const DispatcherState::Dataset* dataset = core_.state_.FindDataset(params.dataset_id());
  if (source == core_.source_splits_.end() || !source->second.ok() || dataset == nullptr) return -1;
  const int64_t per_split =
      PositionsPerSplit(dataset->def, source->second->per_file, core_.SplitOptionsFor(params));
  return (source->second->num_positions + per_split - 1) / per_split;
}

void StatusRpcs::ExportMetrics(MetricsRegistry& registry) {
  for (const StateGauge& gauge : StateGauges()) {
    metric_handles_.push_back(
        registry.AddGaugeCallback(gauge.name, gauge.help, gauge.labels, [this, samples = gauge.samples] {
          absl::MutexLock lock(&core_.mu_);
          return samples(core_.state_);
        }));
  }
  for (const ScalingGauge& gauge : ScalingGauges()) {
    metric_handles_.push_back(
        registry.AddGaugeCallback(gauge.name, gauge.help, gauge.labels, [this, samples = gauge.samples] {
          absl::MutexLock lock(&core_.mu_);
          return samples(core_.autoscaler_.advice());
        }));
  }
}

}  // namespace sluice::dispatcher
