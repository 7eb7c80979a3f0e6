// DispatcherImpl's side facing workers: their heartbeats, updates,
// shutdowns and split requests, and what follows from losing a worker
// (returned splits, the crash-loop bound, failed iterations).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/request_checks.h"
#include "pipeline/sharding.h"
#include "pipeline/split_provider.h"
#include "service/grpc_util.h"

namespace sluice::dispatcher {
namespace {

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void DispatcherImpl::RemoveWorker(const std::string& address, const std::string& reason,
                                  std::vector<std::pair<std::string, proto::TaskDef>>* new_tasks) {
  worker_heartbeats_.erase(address);
  worker_heartbeat_unix_ms_.erase(address);
  unreachable_reports_.erase(address);
  std::vector<int64_t> running;
  for (const auto* task : state_.TasksOfWorker(address)) {
    if (!task->finished) running.push_back(task->id);
  }
  proto::Update update;
  update.mutable_remove_worker()->set_address(address);
  update.mutable_remove_worker()->set_reason(reason);
  if (absl::Status s = Apply(update); !s.ok()) {
    spdlog::error("removing worker {}: {}", address, std::string(s.message()));
    return;
  }
  const auto now = Clock::now();
  for (int64_t id : running) NoteLostTask(*state_.FindTask(id), reason, now);
  AssignReturnedSplits(new_tasks);
}

void DispatcherImpl::NoteLostTask(const DispatcherState::Task& task, const std::string& reason,
                                  Clock::time_point now) {
  auto started = task_started_.find(task.id);
  const auto lived = started == task_started_.end() ? Clock::duration::max() : now - started->second;
  if (started != task_started_.end()) task_started_.erase(started);
  const auto* iteration = state_.FindIteration(task.iteration_id);
  if (iteration->error_code != 0 || iteration->collected) return;
  // A shutdown is not a crash, nor is a worker that lives but that clients
  // cannot reach; a task that ran a while shows the pipeline can run.
  if (reason == "worker shut down" || absl::StartsWith(reason, kUnreachableReason) ||
      lived >= kCrashLoopTaskLifetime) {
    crash_losses_.erase(task.iteration_id);
    return;
  }
  std::vector<std::string>& losses = crash_losses_[task.iteration_id];
  losses.push_back(absl::StrCat("task ", task.id, " on ", task.worker_address, " (", reason, ") after ",
                                std::chrono::duration_cast<std::chrono::milliseconds>(lived).count(), " ms"));
  if (static_cast<int>(losses.size()) < kCrashLoopLosses) return;
  const std::string message = absl::StrCat(
      "iteration ", task.iteration_id, " lost its tasks ", losses.size(), " times in a row, each within ",
      std::chrono::duration_cast<std::chrono::milliseconds>(kCrashLoopTaskLifetime).count(),
      " ms of starting, so its pipeline most likely crashes the workers (see their logs): ",
      absl::StrJoin(losses, "; "));
  crash_losses_.erase(task.iteration_id);
  FailIteration(task.iteration_id, absl::StatusCode::kInternal, message);
}

void DispatcherImpl::ForgetIteration(int64_t iteration_id) {
  split_providers_.erase(iteration_id);
  crash_losses_.erase(iteration_id);
  iteration_idle_since_.erase(iteration_id);
  if (const auto* iteration = state_.FindIteration(iteration_id); iteration != nullptr) {
    for (int64_t task : iteration->tasks) task_started_.erase(task);
  }
}

void DispatcherImpl::FailIteration(int64_t iteration_id, absl::StatusCode code, const std::string& message) {
  proto::Update update;
  auto* u = update.mutable_fail_iteration();
  u->set_iteration_id(iteration_id);
  u->set_code(static_cast<int>(code));
  u->set_message(message);
  if (absl::Status s = Apply(update); !s.ok()) {
    spdlog::error("failing iteration {}: {}", iteration_id, std::string(s.message()));
    return;
  }
  spdlog::warn("iteration {} failed: {}", iteration_id, message);
  ForgetIteration(iteration_id);
}

bool DispatcherImpl::MayRunIn(const DispatcherState::Iteration& iteration, const std::string& address) const {
  if (iteration.error_code != 0) return false;
  const proto::JobParams& params = state_.FindJob(iteration.job_id)->params;
  const bool whole_epoch_per_worker =
      params.processing_mode() == proto::PARALLEL_EPOCHS && !IsStaticSharding(params);
  return std::none_of(iteration.tasks.begin(), iteration.tasks.end(), [&](int64_t id) {
    const auto* task = state_.FindTask(id);
    return task->worker_address == address && task->lost &&
           (whole_epoch_per_worker || absl::StartsWith(task->lost_reason, kUnreachableReason));
  });
}

void DispatcherImpl::NoteUnreachable(const std::string& address,
                                     std::vector<std::pair<std::string, proto::TaskDef>>* new_tasks) {
  if (state_.FindWorker(address) == nullptr) return;
  const auto now = Clock::now();
  auto heard = worker_heartbeats_.find(address);
  if (heard == worker_heartbeats_.end() || now - heard->second >= kUnreachableWorkerSilence) {
    spdlog::warn("worker {}: a client cannot reach it and it is silent; removed, its tasks end", address);
    RemoveWorker(address, "unreachable from a client and silent", new_tasks);
    return;
  }
  // It heartbeats, so it lives, but readers cannot reach it at the address
  // it gave (a wrong advertised_address, a firewall): after as long as a
  // silent worker would get, its tasks end so that reads can finish.
  auto [reports, inserted] = unreachable_reports_.try_emplace(address, now, now);
  if (!inserted && now - reports->second.second > kUnreachableWorkerSilence) reports->second.first = now;
  reports->second.second = now;
  const auto reported = now - reports->second.first;
  if (reported < std::chrono::milliseconds(config_.worker_timeout_ms)) return;
  unreachable_reports_.erase(reports);
  const std::string reason = absl::StrCat(
      kUnreachableReason, " for ", std::chrono::duration_cast<std::chrono::milliseconds>(reported).count(),
      " ms though it heartbeats (check its advertised_address)");
  spdlog::warn("worker {}: {}; removed, its tasks end", address, reason);
  RemoveWorker(address, reason, new_tasks);
}

void DispatcherImpl::AssignReturnedSplits(std::vector<std::pair<std::string, proto::TaskDef>>* new_tasks) {
  std::vector<int64_t> orphaned;
  for (const auto& [id, iteration] : state_.iterations()) {
    if (iteration.collected || iteration.error_code != 0 || iteration.returned_splits.empty()) continue;
    const bool has_taker =
        std::any_of(iteration.tasks.begin(), iteration.tasks.end(), [this](int64_t task_id) {
          const auto* task = state_.FindTask(task_id);
          return !task->finished && !task->last_end_of_splits &&
                 state_.FindWorker(task->worker_address) != nullptr;
        });
    if (!has_taker) orphaned.push_back(id);
  }
  for (int64_t id : orphaned) {
    std::string least_busy;
    size_t fewest = SIZE_MAX;
    for (const auto& [address, worker] : state_.workers()) {
      if (!MayRunIn(*state_.FindIteration(id), address)) continue;
      size_t running = 0;
      for (const auto* task : state_.TasksOfWorker(address)) running += task->finished ? 0 : 1;
      if (running < fewest) {
        fewest = running;
        least_busy = address;
      }
    }
    // With no worker left, the next one to register gets a task.
    if (least_busy.empty()) return;
    const int64_t task_id = state_.NextTaskId();
    if (!CreateTask(id, least_busy).ok()) continue;
    FillTaskDef(*state_.FindTask(task_id), &new_tasks->emplace_back(least_busy, proto::TaskDef()).second);
    spdlog::info("iteration {}: task {} on {} takes {} returned splits", id, task_id, least_busy,
                 CountSplits(state_.FindIteration(id)->returned_splits));
  }
}

absl::Status DispatcherImpl::WorkerHeartbeat(const proto::WorkerHeartbeatRequest& request,
                                             proto::WorkerHeartbeatResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  const std::string& address = request.worker_address();
  std::vector<std::pair<std::string, proto::TaskDef>> new_tasks;
  {
    absl::MutexLock lock(&mu_);
    const auto* known = state_.FindWorker(address);
    if (known != nullptr && !request.incarnation().empty() && known->incarnation != request.incarnation()) {
      // The process restarted: whatever the old one ran is gone.
      spdlog::warn("worker {} restarted; the tasks of its previous run are lost", address);
      RemoveWorker(address, "worker restarted", &new_tasks);
      known = nullptr;
    }
    worker_heartbeats_[address] = Clock::now();
    worker_heartbeat_unix_ms_[address] = UnixMillis();
    if (known == nullptr) {
      proto::Update update;
      update.mutable_register_worker()->set_address(address);
      *update.mutable_register_worker()->mutable_tags() = request.tags();
      update.mutable_register_worker()->set_incarnation(request.incarnation());
      if (absl::Status s = Apply(update); !s.ok()) return s;
      // A new worker joins every unfinished iteration; with static
      // sharding, only to run its own shard, if no live task runs it.
      std::vector<int64_t> unfinished;
      for (const auto& [id, iteration] : state_.iterations()) {
        const proto::JobParams& params = state_.FindJob(iteration.job_id)->params;
        if (iteration.finished || !RunsOn(params, address) || !MayRunIn(iteration, address)) continue;
        const bool shard_taken = IsStaticSharding(params) &&
                                 std::any_of(iteration.tasks.begin(), iteration.tasks.end(), [&](int64_t t) {
                                   const auto* task = state_.FindTask(t);
                                   return task->worker_address == address && !task->lost;
                                 });
        if (!shard_taken) unfinished.push_back(id);
      }
      for (int64_t id : unfinished) {
        if (absl::Status s = CreateTask(id, address); !s.ok()) return s;
      }
      spdlog::info("worker {} registered; {} tasks", address, unfinished.size());
    }
    std::set<int64_t> current(request.current_tasks().begin(), request.current_tasks().end());
    for (const auto* task : state_.TasksOfWorker(address)) {
      const auto* iteration = state_.FindIteration(task->iteration_id);
      if (current.contains(task->id) || task->finished || iteration->collected || iteration->error_code != 0)
        continue;
      FillTaskDef(*task, response->add_new_tasks());
    }
    for (int64_t id : current) {
      const auto* task = state_.FindTask(id);
      // A worker that was declared lost but lives on drops what it ran then;
      // every worker drops the tasks of collected iterations.
      if (task == nullptr || task->worker_address != address || task->lost ||
          state_.FindIteration(task->iteration_id)->collected ||
          state_.FindIteration(task->iteration_id)->error_code != 0) {
        response->add_tasks_to_delete(id);
      }
    }
  }
  PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status DispatcherImpl::WorkerUpdates(const proto::WorkerUpdatesRequest& request,
                                           proto::WorkerUpdatesResponse*) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (int64_t task_id : request.finished_tasks()) {
    const auto* task = state_.FindTask(task_id);
    // A worker finishes its own tasks only.
    if (task == nullptr || task->finished || task->worker_address != request.worker_address()) continue;
    const int64_t iteration_id = task->iteration_id;
    proto::Update update;
    update.mutable_finish_task()->set_task_id(task_id);
    if (absl::Status s = Apply(update); !s.ok()) return s;
    // A task that ran to its end is progress: the iteration's pipeline
    // does not crash every worker.
    task_started_.erase(task_id);
    crash_losses_.erase(iteration_id);
  }
  // A pipeline that failed on one worker would fail on the next: the
  // iteration fails with the worker's words instead of moving on.
  for (const proto::TaskFailure& failure : request.failed_tasks()) {
    const auto* task = state_.FindTask(failure.task_id());
    if (task == nullptr || task->worker_address != request.worker_address()) continue;
    const auto* iteration = state_.FindIteration(task->iteration_id);
    if (iteration->error_code != 0 || iteration->collected) continue;
    FailIteration(iteration->id, static_cast<absl::StatusCode>(failure.code()),
                  absl::StrCat("task ", task->id, " on worker ", request.worker_address(), ": ",
                               failure.message().substr(0, 4096)));
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::WorkerShutdown(const proto::WorkerShutdownRequest& request,
                                            proto::WorkerShutdownResponse*) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  std::vector<std::pair<std::string, proto::TaskDef>> new_tasks;
  {
    absl::MutexLock lock(&mu_);
    if (state_.FindWorker(request.worker_address()) == nullptr) return absl::OkStatus();
    spdlog::info("worker {} shut down; its tasks end", request.worker_address());
    RemoveWorker(request.worker_address(), "worker shut down", &new_tasks);
  }
  PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetSplits(const proto::GetSplitsRequest& request,
                                       proto::GetSplitsResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  const auto* task = state_.FindTask(request.task_id());
  if (task == nullptr || task->iteration_id != request.iteration_id()) {
    return absl::NotFoundError(
        absl::StrCat("task ", request.task_id(), " of iteration ", request.iteration_id(), " is unknown"));
  }
  auto answer = [response](const std::vector<Split>& splits, bool end) {
    for (const Split& split : splits) SplitToMessage(split, response->add_splits());
    response->set_end_of_splits(end);
    return absl::OkStatus();
  };
  // A retry (its answer was lost, or this dispatcher restarted) gets the
  // splits already leased for it.
  if (request.request_id() != 0 && request.request_id() == task->last_split_request) {
    return answer(task->last_split_response, task->last_end_of_splits);
  }
  const auto* iteration = state_.FindIteration(task->iteration_id);
  // A lost task, or a collected or failed iteration, reads nothing more.
  if (task->finished || iteration->collected || iteration->error_code != 0) return answer({}, true);
  auto provider = split_providers_.find(task->iteration_id);
  if (provider == split_providers_.end()) {
    return absl::NotFoundError(absl::StrCat("iteration ", request.iteration_id(), " has no splits"));
  }
  // 0 (unset) asks for one.
  const int max_splits = std::clamp<int64_t>(request.max_splits(), 1, config_.splits_per_request);
  proto::Update update;
  auto* lease = update.mutable_lease_splits();
  lease->set_task_id(task->id);
  lease->set_request_id(request.request_id());
  // Splits of lost tasks first, then new ones, consecutive splits joined
  // into runs.
  int64_t room = max_splits;
  bool returned_left = false;
  for (const auto& [seq, run] : iteration->returned_splits) {
    if (room == 0) {
      returned_left = true;
      break;
    }
    const int64_t taken = std::min(room, run.count);
    SplitToMessage(SplitRunPart(run, 0, taken), lease->add_splits());
    returned_left = taken < run.count;
    room -= taken;
  }
  bool exhausted = iteration->splits_exhausted;
  int64_t next_seq = iteration->next_split_seq;
  std::optional<Split> run;
  for (; !exhausted && room > 0; --room) {
    Split split;
    if (absl::Status s = provider->second->GetNext(&split, &exhausted); !s.ok()) return s;
    if (exhausted) break;
    split.seq = next_seq++;
    if (run.has_value() && ExtendSplitRun(&*run, split)) continue;
    if (run.has_value()) SplitToMessage(*run, lease->add_splits());
    run = split;
  }
  if (run.has_value()) SplitToMessage(*run, lease->add_splits());
  lease->set_cursor(provider->second->Save());
  lease->set_provider_exhausted(exhausted);
  lease->set_end_of_splits(exhausted && !returned_left);
  if (absl::Status s = Apply(update); !s.ok()) return s;
  const auto* leased = state_.FindTask(request.task_id());
  return answer(leased->last_split_response, leased->last_end_of_splits);
}

void DispatcherImpl::FillTaskDef(const DispatcherState::Task& task, proto::TaskDef* def) const {
  const auto* iteration = state_.FindIteration(task.iteration_id);
  const auto* job = state_.FindJob(iteration->job_id);
  def->set_task_id(task.id);
  def->set_iteration_id(task.iteration_id);
  *def->mutable_dataset() = state_.FindDataset(job->params.dataset_id())->def;
  def->set_processing_mode(job->params.processing_mode());
  def->set_sharding_policy(job->params.sharding_policy());
  def->set_exactly_once(job->params.exactly_once());
  def->set_num_consumers(job->params.num_consumers());
  if (IsStaticSharding(job->params)) {
    const auto& workers = job->params.static_workers();
    def->set_num_shards(workers.size());
    def->set_shard_index(
        static_cast<int>(std::find(workers.begin(), workers.end(), task.worker_address) - workers.begin()));
  }
}

}  // namespace sluice::dispatcher
