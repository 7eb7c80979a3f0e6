// StatusRpcs: the status RPCs, the status page's data (docs/operations.md)
// and the state's gauges. Each takes the lock and hands the state to
// dispatcher/status_views.h or dispatcher/state_metrics.h, which do the
// work. A tenant's status shows every worker but only its own datasets,
// jobs, iterations and tasks, and neither the workers' throughput nor the
// recent errors, which belong to every tenant.
#ifndef SLUICE_DISPATCHER_STATUS_RPCS_H_
#define SLUICE_DISPATCHER_STATUS_RPCS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/status_views.h"
#include "service/metrics.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

class StatusRpcs {
 public:
  explicit StatusRpcs(DispatcherCore& core);

  absl::Status GetWorkers(const proto::GetWorkersRequest& request, proto::GetWorkersResponse* response,
                          const Caller& caller);
  absl::Status GetStatus(const proto::GetStatusRequest& request, proto::StatusSnapshot* response,
                         const Caller& caller);
  // /status.json's body.
  std::string StatusJson(const Caller& caller);
  // The state's gauges (sluice_workers, sluice_jobs, sluice_iterations by
  // state, ...; per tenant, sluice_tenant_*) in `registry`, computed at
  // each scrape, until this is destroyed.
  void ExportMetrics(MetricsRegistry& registry);

 private:
  using Clock = DispatcherCore::Clock;

  // What dispatcher/status_views.h reads, valid while the lock is held.
  StatusSources StatusSourcesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // Splits of a distributed_epoch iteration, or -1 when not known.
  int64_t SplitsTotal(const DispatcherState::Iteration& iteration, const proto::JobParams& params) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);

  DispatcherCore& core_;
  std::vector<MetricCallbackHandle> metric_handles_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_STATUS_RPCS_H_
