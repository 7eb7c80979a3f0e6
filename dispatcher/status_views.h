// What the dispatcher shows about itself, filtered for the caller: the
// workers (GetWorkers), the whole state (GetStatus's StatusSnapshot) and
// the status page's /status.json. A tenant sees every worker (they serve
// every tenant) and only its own datasets, jobs, iterations and tasks, and
// no throughput or recent errors. Reads only; StatusRpcs calls these
// under its lock.
#ifndef SLUICE_DISPATCHER_STATUS_VIEWS_H_
#define SLUICE_DISPATCHER_STATUS_VIEWS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "dispatcher/autoscaler.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/worker_activity.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// What the views read.
struct StatusSources {
  const DispatcherState& state;
  const WorkerActivity& workers;
  // The autoscaler's advice, for /status.json's "scaling"; none: left out.
  const Autoscaler::Advice* scaling = nullptr;
  // An iteration's splits in all, or -1 when not known (not
  // distributed_epoch, without end, or its source not listed yet).
  std::function<int64_t(const DispatcherState::Iteration&, const proto::JobParams&)> splits_total;
};

bool MaySeeIteration(const DispatcherState& state, const Caller& caller, int64_t iteration_id);

void FillWorkers(const StatusSources& sources, const Caller& caller, proto::GetWorkersResponse* response);
void FillStatusSnapshot(const StatusSources& sources, const Caller& caller, proto::StatusSnapshot* response);
// The status page's JSON: version, now and uptime, then workers, datasets,
// jobs, iterations, the autoscaling advice and the recent warnings and
// errors.
std::string StatusJson(const StatusSources& sources, const Caller& caller, int64_t now_ms,
                       double uptime_seconds);

// Starts keeping the process's recent warnings and errors for the page
// (the daemon calls it at start, so that those before the first view are
// kept too).
void KeepRecentProblems();

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_STATUS_VIEWS_H_
