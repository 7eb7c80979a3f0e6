// DispatcherImpl: the dispatcher as the gRPC adapter sees it. Requests come
// in as protos and go out as absl::Status; each goes to the part that
// serves its caller (dispatcher_core.h says which part does what), and all
// parts share one DispatcherCore: the state, its lock and its journal.
//
// Glossary (see docs/design.md): a dataset is a registered DatasetDef; a
// job is a use of a dataset in one processing mode, shared by name; an
// iteration is one repetition of a job; a task is one worker's share of an
// iteration; a split is a range of source positions; a consumer (iteration
// client) is a reader of an iteration.
//
// Protocol:
//  1. A client registers its dataset (deduplicated by fingerprint), gets or
//     creates a job, then an iteration for its next repetition, and gets an
//     iteration-client id.
//  2. Creating an iteration makes one task per live worker; a worker that
//     registers later gets a task for every unfinished iteration.
//  3. Workers learn their tasks from a push (ProcessTask) or, failing
//     that, their heartbeats, and run them. In
//     distributed_epoch they pull splits (GetSplits) from the iteration's
//     split provider, several per call.
//  4. Clients learn the tasks (and their workers) from heartbeats and read
//     elements from the workers. A worker reports a task finished once its
//     pipeline ended; the iteration is finished when all its tasks are.
//  5. A worker that shuts down, stops heartbeating for worker_timeout_ms,
//     restarts (a new incarnation), or is reported unreachable while
//     silent by a client with a task there, is removed: its tasks end and
//     their undelivered splits go to other tasks, made anew if no task can
//     take them. A worker that heartbeats but that an iteration's clients
//     cannot reach for worker_timeout_ms loses only that iteration's tasks
//     (one tenant must not end another's), and stays.
//  6. An iteration without clients for job_gc_timeout_ms is collected: it
//     counts as finished and its workers drop its tasks.
//  7. A worker drains (DrainWorker, or a heartbeat saying `draining` after
//     SIGTERM): it gets no new tasks, its tasks get no new splits (they end
//     once they have read the splits they hold) or, in parallel_epochs,
//     stop early; a drained task that ends is finished, not lost. The
//     worker leaves (WorkerShutdown) once readers have taken its elements.
#ifndef SLUICE_DISPATCHER_DISPATCHER_IMPL_H_
#define SLUICE_DISPATCHER_DISPATCHER_IMPL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "dispatcher/client_rpcs.h"
#include "dispatcher/dispatcher_config.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/job_rpcs.h"
#include "dispatcher/liveness.h"
#include "dispatcher/status_rpcs.h"
#include "dispatcher/worker_rpcs.h"
#include "service/metrics.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// The exit status of a dispatcher that could not write its journal.
inline constexpr int kJournalFailureExitCode = 3;

class DispatcherImpl {
 public:
  using TaskPushFn = DispatcherCore::TaskPushFn;
  // dispatcherd's main exits with kJournalFailureExitCode when told.
  using JournalFailureFn = DispatcherCore::JournalFailureFn;

  explicit DispatcherImpl(DispatcherConfig config, TaskPushFn push_task = nullptr,
                          JournalFailureFn on_journal_failure = nullptr);
  DispatcherImpl(const DispatcherImpl&) = delete;
  DispatcherImpl& operator=(const DispatcherImpl&) = delete;

  // Recovers the state journaled in work_dir (if set), then starts the
  // thread that removes workers whose heartbeats stopped. An error (a
  // damaged journal) names the file and byte offset.
  absl::Status Start();

  // Each RPC takes its caller (the gRPC adapter's RpcAuthenticator says
  // who): a tenant sees and makes only its own datasets, jobs and
  // iterations; the default Caller is the cluster, which sees all.
  absl::Status GetVersion(const proto::GetVersionRequest& request, proto::GetVersionResponse* response,
                          const Caller& caller = {});
  absl::Status GetOrRegisterDataset(const proto::GetOrRegisterDatasetRequest& request,
                                    proto::GetOrRegisterDatasetResponse* response,
                                    const Caller& caller = {}) {
    return Durable(jobs_.GetOrRegisterDataset(request, response, caller));
  }
  absl::Status GetDatasetInfo(const proto::GetDatasetInfoRequest& request,
                              proto::GetDatasetInfoResponse* response, const Caller& caller = {}) {
    return Durable(jobs_.GetDatasetInfo(request, response, caller));
  }
  absl::Status GetOrCreateJob(const proto::GetOrCreateJobRequest& request,
                              proto::GetOrCreateJobResponse* response, const Caller& caller = {}) {
    return Durable(jobs_.GetOrCreateJob(request, response, caller));
  }
  absl::Status GetOrCreateIteration(const proto::GetOrCreateIterationRequest& request,
                                    proto::GetOrCreateIterationResponse* response,
                                    const Caller& caller = {}) {
    return Durable(jobs_.GetOrCreateIteration(request, response, caller));
  }
  absl::Status ClientHeartbeat(const proto::ClientHeartbeatRequest& request,
                               proto::ClientHeartbeatResponse* response, const Caller& caller = {}) {
    return Durable(clients_.ClientHeartbeat(request, response, caller));
  }
  absl::Status ReleaseIterationClient(const proto::ReleaseIterationClientRequest& request,
                                      proto::ReleaseIterationClientResponse* response,
                                      const Caller& caller = {}) {
    return Durable(clients_.ReleaseIterationClient(request, response, caller));
  }
  absl::Status WorkerHeartbeat(const proto::WorkerHeartbeatRequest& request,
                               proto::WorkerHeartbeatResponse* response, const Caller& caller = {}) {
    bool journaled = false;
    absl::Status answer = workers_.WorkerHeartbeat(request, response, caller, &journaled);
    // At 10,000 workers nearly every heartbeat changes nothing and tells
    // nothing; waiting for other requests' records (GetSplits') to reach
    // the disk put one or two fdatasyncs into its latency.
    if (answer.ok() && !journaled && !HeartbeatAnswerTellsAnything(*response)) return answer;
    return Durable(answer);
  }
  absl::Status WorkerUpdates(const proto::WorkerUpdatesRequest& request,
                             proto::WorkerUpdatesResponse* response, const Caller& caller = {}) {
    return Durable(workers_.WorkerUpdates(request, response, caller));
  }
  absl::Status WorkerShutdown(const proto::WorkerShutdownRequest& request,
                              proto::WorkerShutdownResponse* response, const Caller& caller = {}) {
    return Durable(workers_.WorkerShutdown(request, response, caller));
  }
  absl::Status GetSplits(const proto::GetSplitsRequest& request, proto::GetSplitsResponse* response,
                         const Caller& caller = {}) {
    return Durable(workers_.GetSplits(request, response, caller));
  }
  absl::Status GetWorkers(const proto::GetWorkersRequest& request, proto::GetWorkersResponse* response,
                          const Caller& caller = {}) {
    return Durable(status_.GetWorkers(request, response, caller));
  }
  absl::Status GetStatus(const proto::GetStatusRequest& request, proto::StatusSnapshot* response,
                         const Caller& caller = {}) {
    return Durable(status_.GetStatus(request, response, caller));
  }
  // The adapter lets only the cluster token call it (a worker's RPC).
  absl::Status DrainWorker(const proto::DrainWorkerRequest& request, proto::DrainWorkerResponse* response,
                           const Caller& caller = {}) {
    return Durable(workers_.DrainWorker(request, response, caller));
  }

  // The secret GetOrCreateIteration gave `iteration_client_id`, for
  // in-process callers (tests) acting for a client they made.
  std::string ClientSecretOf(int64_t iteration_client_id) const {
    return core_.ClientSecretOf(iteration_client_id);
  }
  // Returns once no snapshot of the journal is being written (tests that
  // look at the work dir).
  void WaitForSnapshot() { core_.WaitForSnapshot(); }

  // The status page's data (docs/operations.md), and the state's gauges
  // in `registry` (status_rpcs.h).
  std::string StatusJson(const Caller& caller = {}) { return status_.StatusJson(caller); }
  void ExportMetrics(MetricsRegistry& registry) { status_.ExportMetrics(registry); }

 private:
  // An answer waits until what its request changed is on disk
  // (DispatcherCore::WaitForJournal); a journal that cannot be synced
  // fails it.
  absl::Status Durable(absl::Status answer) {
    absl::Status journal = core_.WaitForJournal();
    return journal.ok() ? answer : journal;
  }

  // Destroyed in reverse: the gauges are unregistered, then the monitor
  // thread stops, before the core's state goes.
  DispatcherCore core_;
  Liveness liveness_{core_};
  JobRpcs jobs_{core_};
  ClientRpcs clients_{core_, liveness_};
  WorkerRpcs workers_{core_, liveness_};
  StatusRpcs status_{core_};
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_DISPATCHER_IMPL_H_
