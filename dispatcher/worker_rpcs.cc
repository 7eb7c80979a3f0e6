// WorkerRpcs: the workers' requests: heartbeats (registration, and the
// tasks to run and to drop), updates (tasks finished or failed), shutdowns
// and split requests.
#include "dispatcher/worker_rpcs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dispatcher/request_checks.h"
#include "pipeline/sharding.h"
#include "pipeline/split_provider.h"
#include "service/grpc_util.h"
#include "service/int_ranges.h"
#include "service/metrics.h"

namespace sluice::dispatcher {
namespace {

// Whether a draining worker may drop `task`, which then no longer holds it
// back: a reader read it to its end, or its iteration has no reader left
// (one that stopped early; garbage collection would drop it later).
bool DrainedTaskDone(const DispatcherState& state, const DispatcherState::Task& task) {
  return task.completed || state.FindIteration(task.iteration_id)->clients.empty();
}

}  // namespace

bool HeartbeatAnswerTellsAnything(const proto::WorkerHeartbeatResponse& response) {
  return response.new_tasks_size() > 0 || response.tasks_to_delete_size() > 0 || response.drain();
}

WorkerRpcs::WorkerRpcs(DispatcherCore& core, Liveness& liveness) : core_(core), liveness_(liveness) {}

absl::Status WorkerRpcs::WorkerHeartbeat(const proto::WorkerHeartbeatRequest& request,
                                         proto::WorkerHeartbeatResponse* response, const Caller&,
                                         bool* journaled) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  response->set_dispatcher_incarnation(core_.client_secrets_.Incarnation());
  const std::string& address = request.worker_address();
  NewTasks new_tasks;
  {
    absl::MutexLock lock(&core_.mu_);
    const auto* known = core_.state_.FindWorker(address);
    if (known != nullptr && !request.incarnation().empty() && known->incarnation != request.incarnation()) {
      // The process restarted: whatever the old one ran is gone.
      spdlog::warn("worker {} restarted; the tasks of its previous run are lost", address);
      liveness_.RemoveWorker(address, "worker restarted", &new_tasks);
      *journaled = true;
      known = nullptr;
    }
    core_.worker_activity_.NoteHeartbeat(address, Clock::now(), UnixMillis(), request.elements_sent(),
                                         request.bytes_sent());
    for (const proto::TaskLoad& load : request.task_loads()) {
      core_.autoscaler_.NoteTask(load.task_id(), load.busy_seconds(), load.idle_seconds());
    }
    if (known == nullptr) {
      *journaled = true;
      proto::Update update;
      update.mutable_register_worker()->set_address(address);
      *update.mutable_register_worker()->mutable_tags() = request.tags();
      update.mutable_register_worker()->set_incarnation(request.incarnation());
      if (absl::Status s = core_.Apply(update); !s.ok()) return s;
      // Draining already (back after a dispatcher restart): MayRunIn
      // then gives it no task.
      if (request.draining()) {
        if (absl::Status s = liveness_.DrainWorker(address, &new_tasks); !s.ok()) return s;
      }
      // A new worker joins every unfinished iteration; with static
      // sharding, only to run its own shard, if no live task runs it.
      std::vector<int64_t> unfinished;
      for (const auto& [id, iteration] : core_.state_.iterations()) {
        const proto::JobParams& params = core_.state_.FindJob(iteration.job_id)->params;
        if (iteration.finished || !RunsOn(params, address) || !core_.MayRunIn(iteration, address)) continue;
        const bool shard_taken = IsStaticSharding(params) &&
                                 std::any_of(iteration.tasks.begin(), iteration.tasks.end(), [&](int64_t t) {
                                   const auto* task = core_.state_.FindTask(t);
                                   return task->worker_address == address && !task->lost;
                                 });
        if (!shard_taken) unfinished.push_back(id);
      }
      for (int64_t id : unfinished) {
        if (absl::Status s = core_.CreateTask(id, address); !s.ok()) return s;
      }
      spdlog::info("worker {} registered; {} tasks", address, unfinished.size());
    }
    // After SIGTERM a worker says `draining` in every heartbeat.
    if (request.draining()) {
      *journaled = true;
      if (absl::Status s = liveness_.DrainWorker(address, &new_tasks); !s.ok()) return s;
    }
    const bool draining = core_.state_.IsDraining(address);
    response->set_drain(draining);
    std::set<int64_t> current(request.current_tasks().begin(), request.current_tasks().end());
    for (const auto* task : core_.state_.TasksOfWorker(address)) {
      const auto* iteration = core_.state_.FindIteration(task->iteration_id);
      // A completed task (read to its end) is not started again: its
      // worker may have dropped it while its report of the end was on the way.
      if (current.contains(task->id) || task->finished || task->completed || iteration->collected ||
          iteration->error_code != 0)
        continue;
      core_.FillTaskDef(*task, response->add_new_tasks());
    }
    for (int64_t id : current) {
      const auto* task = core_.state_.FindTask(id);
      // A worker that was declared lost but lives on drops what it ran then,
      // unless each worker runs the whole epoch: its readers read such a
      // task on (client/read/read_state.h, StillReading), and nobody else
      // runs it. Every worker drops the tasks of collected iterations, and
      // a draining one those it is done with.
      if (task == nullptr || task->worker_address != address ||
          (task->lost &&
           !WholeEpochPerWorker(
               core_.state_.FindJob(core_.state_.FindIteration(task->iteration_id)->job_id)->params)) ||
          core_.state_.FindIteration(task->iteration_id)->collected ||
          core_.state_.FindIteration(task->iteration_id)->error_code != 0 ||
          (draining && DrainedTaskDone(core_.state_, *task))) {
        response->add_tasks_to_delete(id);
      }
    }
  }
  core_.PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status WorkerRpcs::WorkerUpdates(const proto::WorkerUpdatesRequest& request,
                                       proto::WorkerUpdatesResponse*, const Caller&) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  // Tasks of a dispatcher that restarted without its state: their ids
  // may name other tasks now. (Empty: a task no dispatcher incarnation
  // made, such as a test's push.)
  if (!request.dispatcher_incarnation().empty() &&
      request.dispatcher_incarnation() != core_.client_secrets_.Incarnation()) {
    spdlog::info("worker {}: ignored a report of tasks of an earlier dispatcher incarnation",
                 request.worker_address());
    return absl::OkStatus();
  }
  absl::MutexLock lock(&core_.mu_);
  for (int64_t task_id : request.finished_tasks()) {
    const auto* task = core_.state_.FindTask(task_id);
    // A worker finishes its own tasks only.
    if (task == nullptr || task->finished || task->worker_address != request.worker_address()) continue;
    const int64_t iteration_id = task->iteration_id;
    proto::Update update;
    update.mutable_finish_task()->set_task_id(task_id);
    const bool was_finished = core_.state_.FindIteration(iteration_id)->finished;
    if (absl::Status s = core_.Apply(update); !s.ok()) return s;
    // A task that ran to its end is progress: the iteration's pipeline
    // does not crash every worker.
    core_.crash_loop_.TaskFinished(task_id, iteration_id);
    if (const auto* iteration = core_.state_.FindIteration(iteration_id);
        !was_finished && iteration->finished) {
      spdlog::info("iteration {} (job {}, repetition {}) finished", iteration_id, iteration->job_id,
                   iteration->repetition);
    }
  }
  // A pipeline that failed on one worker would fail on the next: the
  // iteration fails with the worker's words instead of moving on.
  for (const proto::TaskFailure& failure : request.failed_tasks()) {
    const auto* task = core_.state_.FindTask(failure.task_id());
    if (task == nullptr) {
      // Its iteration was collected first; an operator still hears of it.
      spdlog::warn("task {} on worker {} failed after its iteration was collected: {}", failure.task_id(),
                   request.worker_address(), failure.message().substr(0, 4096));
      continue;
    }
    if (task->worker_address != request.worker_address()) continue;
    const auto* iteration = core_.state_.FindIteration(task->iteration_id);
    if (task->lost) {
      // A whole-epoch task its worker kept after the dispatcher gave it up:
      // its loss is counted already, and readers that read it on get the
      // error from the worker.
      spdlog::warn("task {} on worker {} failed after it was counted lost: {}", task->id,
                   request.worker_address(), failure.message().substr(0, 4096));
      continue;
    }
    if (iteration->error_code != 0 || iteration->collected) {
      // Said all the same: its reader may have seen the error and let the
      // iteration go before the worker's report came in.
      spdlog::warn("task {} on worker {} failed after its iteration {} had ended: {}", task->id,
                   request.worker_address(), iteration->id, failure.message().substr(0, 4096));
      continue;
    }
    liveness_.FailIteration(iteration->id, static_cast<absl::StatusCode>(failure.code()),
                            absl::StrCat("task ", task->id, " on worker ", request.worker_address(), ": ",
                                         failure.message().substr(0, 4096)));
  }
  return absl::OkStatus();
}

absl::Status WorkerRpcs::WorkerShutdown(const proto::WorkerShutdownRequest& request,
                                        proto::WorkerShutdownResponse*, const Caller&) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  NewTasks new_tasks;
  {
    absl::MutexLock lock(&core_.mu_);
    if (core_.state_.FindWorker(request.worker_address()) == nullptr) return absl::OkStatus();
    spdlog::info("worker {} shut down; its tasks end", request.worker_address());
    liveness_.RemoveWorker(request.worker_address(), "worker shut down", &new_tasks);
  }
  core_.PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status WorkerRpcs::DrainWorker(const proto::DrainWorkerRequest& request, proto::DrainWorkerResponse*,
                                     const Caller&) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  NewTasks new_tasks;
  {
    absl::MutexLock lock(&core_.mu_);
    if (core_.state_.FindWorker(request.worker_address()) == nullptr) {
      return absl::NotFoundError(absl::StrCat("DrainWorker: no worker is registered at ",
                                              request.worker_address(),
                                              " (sluice status lists the workers and their addresses)"));
    }
    if (absl::Status s = liveness_.DrainWorker(request.worker_address(), &new_tasks); !s.ok()) return s;
  }
  core_.PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status WorkerRpcs::GetSplits(const proto::GetSplitsRequest& request, proto::GetSplitsResponse* response,
                                   const Caller&) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  absl::MutexLock lock(&core_.mu_);
  const auto* task = core_.state_.FindTask(request.task_id());
  if (task == nullptr || task->iteration_id != request.iteration_id()) {
    return absl::NotFoundError(
        absl::StrCat("task ", request.task_id(), " of iteration ", request.iteration_id(), " is unknown"));
  }
  // A split run again after a shared exactly_once read lost its task goes
  // with the positions its consumers took (DispatcherState::HoldsLostSplits).
  auto answer = [this, response, iteration_id = task->iteration_id](const std::vector<Split>& splits,
                                                                    bool end) {
    const auto* iteration = core_.state_.FindIteration(iteration_id);
    for (const Split& split : splits) {
      SplitToMessage(split, response->add_splits());
      const auto& taken = iteration->taken_positions;
      for (auto it = taken.lower_bound(split.seq);
           it != taken.end() && it->first < split.seq + std::max<int64_t>(split.count, 1); ++it) {
        proto::SplitDelivery* skip = response->add_skip_positions();
        skip->set_seq(it->first);
        AppendPairs(it->second, skip->mutable_delivered());
      }
    }
    response->set_end_of_splits(end);
    return absl::OkStatus();
  };
  // A retry (its answer was lost, or this dispatcher restarted) gets the
  // splits already leased for it.
  if (request.request_id() != 0 && request.request_id() == task->last_split_request) {
    return answer(task->last_split_response, task->last_end_of_splits);
  }
  const auto* iteration = core_.state_.FindIteration(task->iteration_id);
  // A lost task, or a collected or failed iteration, reads nothing more.
  if (task->finished || iteration->collected || iteration->error_code != 0) return answer({}, true);
  // Nor does a draining worker's task: it ends once it has read the splits
  // it holds, which stay leased to it (an exactly_once read stays exact);
  // the iteration's other tasks read on.
  if (task->drained || core_.state_.IsDraining(task->worker_address)) return answer({}, true);
  // 0 (unset) asks for one. A deterministic reader takes splits in order,
  // so what a worker leases past the others' waits in buffers: small
  // leases make the workers take splits in turn.
  int64_t lease_cap = core_.config_.splits_per_request;
  if (core_.state_.FindJob(iteration->job_id)->params.deterministic()) {
    lease_cap = std::min(
        lease_cap, std::max<int64_t>(1, kDeterministicLeaseElements / core_.config_.elements_per_split));
  }
  const int64_t max_splits = std::clamp<int64_t>(request.max_splits(), 1, lease_cap);
  proto::Update update;
  auto* lease = update.mutable_lease_splits();
  lease->set_task_id(task->id);
  lease->set_request_id(request.request_id());
  if (absl::Status s = core_.split_leaser_.Lease(*iteration, max_splits, lease); !s.ok()) return s;
  if (absl::Status s = core_.Apply(update); !s.ok()) return s;
  static Counter& leased_splits =
      ProcessMetrics()
          .AddCounter("sluice_splits_leased_total",
                      "splits handed to workers in distributed_epoch (reissued ones included)")
          .Get();
  int64_t splits = 0;
  for (const auto& split : lease->splits()) splits += std::max<int64_t>(split.count(), 1);
  leased_splits.Increment(static_cast<double>(splits));
  const auto* leased = core_.state_.FindTask(request.task_id());
  return answer(leased->last_split_response, leased->last_end_of_splits);
}

}  // namespace sluice::dispatcher
