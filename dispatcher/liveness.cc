// Liveness: the monitor thread, and what follows from losing a worker (its
// tasks lost, its splits handed on, the crash-loop bound, failed
// iterations) or a client (released for silence, taken back if it
// returns), and the collection of what is over: abandoned iterations,
// finished jobs and unused datasets.
#include "dispatcher/liveness.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dispatcher/scaling.h"
#include "dispatcher/shared_exactly_once.h"
#include "service/metrics.h"
namespace sluice::dispatcher {
namespace {

// Keeps in `idle_since` since when `key` has been idle; true once it has
// been for `timeout`, seen idle at two checks at least.
template <typename Key>
bool IdleFor(std::map<Key, std::chrono::steady_clock::time_point>& idle_since, const Key& key, bool idle,
             std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration timeout) {
  if (!idle) {
    idle_since.erase(key);
    return false;
  }
  auto [since, inserted] = idle_since.try_emplace(key, now);
  return !inserted && now - since->second >= timeout;
}

// The splits of lost tasks that wait to be handed out again, in all
// iterations.
int64_t SplitsAwaitingReissue(const DispatcherState& state) {
  int64_t splits = 0;
  for (const auto& [id, iteration] : state.iterations()) {
    for (const auto& [seq, run] : iteration.returned_splits) splits += run.count;
    for (const auto& [seq, run] : iteration.held_splits) splits += run.count;
  }
  return splits;
}

Counter& ReturnedSplitsCounter() {
  static Counter& returned =
      ProcessMetrics()
          .AddCounter("sluice_splits_returned_total",
                      "distributed_epoch splits of lost tasks returned to be read again")
          .Get();
  return returned;
}

}  // namespace

Liveness::Liveness(DispatcherCore& core) : core_(core) {}

Liveness::~Liveness() {
  {
    absl::MutexLock lock(&core_.mu_);
    stopping_ = true;
  }
  if (monitor_.joinable()) monitor_.join();
}

void Liveness::StartMonitor() {
  monitor_ = std::thread([this] { RunMonitor(); });
}

void Liveness::RunMonitor() {
  const auto timeout = std::chrono::milliseconds(core_.config_.worker_timeout_ms);
  {
    // A crash after an update that gave splits back (a hold's last report,
    // a worker's removal) and before the task made to take them leaves
    // them with no taker: the recovered state gets one now, not at the
    // next loss, release or drain.
    NewTasks new_tasks;
    {
      absl::MutexLock lock(&core_.mu_);
      if (stopping_) return;
      AssignReturnedSplits(&new_tasks);
    }
    (void)core_.WaitForJournal();
    core_.PushTasks(new_tasks);
  }
  while (true) {
    NewTasks new_tasks;
    {
      absl::MutexLock lock(&core_.mu_);
      // Wakes at least ten times per timeout, or at once on shutdown.
      core_.mu_.AwaitWithTimeout(
          absl::Condition(&stopping_),
          absl::Milliseconds(std::min(core_.config_.worker_timeout_ms, core_.config_.job_gc_timeout_ms) /
                             10));
      if (stopping_) return;
      const auto now = Clock::now();
      CollectAbandonedIterations(now);
      CollectFinishedJobs(now);
      const auto find_silent = [&] {
        return FindSilentWorkers(core_.worker_activity_.last_heard(), now, timeout,
                                 std::chrono::milliseconds(core_.config_.silent_majority_timeout_ms),
                                 excused_workers_);
      };
      SilentWorkers silent = find_silent();
      // Most just came back: the rest keep the longer timeout a while.
      if (NoteSilentMajority(silent)) silent = find_silent();
      for (const auto& [address, silent_for] : silent.to_remove) {
        spdlog::warn("worker {} missed heartbeats for {} ms; removed, its tasks end", address,
                     silent_for.count());
        excused_workers_.erase(address);
        RemoveWorker(address, absl::StrCat("no heartbeat for ", silent_for.count(), " ms"), &new_tasks);
      }
      // A released client is awaited no more: held splits may be back.
      if (ReleaseSilentClients(now)) AssignReturnedSplits(&new_tasks);
      // Here, not per heartbeat: heartbeats only store their figures.
      core_.autoscaler_.Evaluate(ScalingInputs(core_.state_), ServingWorkers(core_.state_), now);
    }
    // What this pass changed reaches the disk now, not with the next
    // request's sync.
    (void)core_.WaitForJournal();
    core_.PushTasks(new_tasks);
  }
}

bool Liveness::NoteSilentMajority(const SilentWorkers& silent) {
  if (silent.majority_silent == suspecting_isolation_) return false;
  suspecting_isolation_ = silent.majority_silent;
  if (suspecting_isolation_) {
    spdlog::warn(
        "{} of {} workers went silent at once (worker_timeout_ms {}): this dispatcher may be cut off from "
        "them, so they stay until silent for {} ms (silent_majority_timeout_ms) or their readers cannot "
        "reach them",
        silent.silent, silent.known, core_.config_.worker_timeout_ms,
        std::max(core_.config_.worker_timeout_ms, core_.config_.silent_majority_timeout_ms));
    return false;
  }
  excused_workers_.clear();
  const auto now = Clock::now();
  for (const auto& [address, last] : silent.silent_workers) excused_workers_.emplace(address, now);
  spdlog::info(
      "most workers are heard again ({} of {} silent; for the next {} ms those keep that timeout, heard or "
      "not)",
      silent.silent, silent.known,
      std::max(core_.config_.worker_timeout_ms, core_.config_.silent_majority_timeout_ms));
  return true;
}

void Liveness::RemoveWorker(const std::string& address, const std::string& reason, NewTasks* new_tasks) {
  core_.worker_activity_.Forget(address);
  static Counter& lost =
      ProcessMetrics()
          .AddCounter("sluice_workers_lost_total", "workers removed: lost, restarted or shut down")
          .Get();
  lost.Increment();
  for (auto reports = unreachable_reports_.begin(); reports != unreachable_reports_.end();) {
    reports = reports->first.second == address ? unreachable_reports_.erase(reports) : std::next(reports);
  }
  std::vector<int64_t> running;
  for (const auto* task : core_.state_.TasksOfWorker(address)) {
    if (!task->finished) running.push_back(task->id);
  }
  std::vector<int64_t> losing;
  for (const auto* task : core_.state_.TasksOfWorker(address)) losing.push_back(task->id);
  FailBrokenSharedReads(losing, reason);
  const int64_t returned_before = SplitsAwaitingReissue(core_.state_);
  const std::map<int64_t, int64_t> holds_before = HoldsOf(losing);
  proto::Update update;
  update.mutable_remove_worker()->set_address(address);
  update.mutable_remove_worker()->set_reason(reason);
  if (!core_.ApplyOrLog(update, absl::StrCat("removing worker ", address))) return;
  LogNewHolds(holds_before);
  ReturnedSplitsCounter().Increment(
      static_cast<double>(std::max<int64_t>(SplitsAwaitingReissue(core_.state_) - returned_before, 0)));
  const auto now = Clock::now();
  for (int64_t id : running) NoteLostTask(*core_.state_.FindTask(id), reason, now);
  AssignReturnedSplits(new_tasks);
}

absl::Status Liveness::DrainWorker(const std::string& address, NewTasks* new_tasks) {
  if (core_.state_.IsDraining(address)) return absl::OkStatus();
  proto::Update update;
  update.mutable_drain_worker()->set_address(address);
  if (absl::Status s = core_.Apply(update); !s.ok()) return s;
  spdlog::info("worker {} drains: no new tasks or splits; it leaves once its tasks are read", address);
  AssignReturnedSplits(new_tasks);
  return absl::OkStatus();
}

void Liveness::NoteLostTask(const DispatcherState::Task& task, const std::string& reason,
                            Clock::time_point now) {
  const Clock::duration lived = core_.crash_loop_.TaskEnded(task.id, now);
  const auto* iteration = core_.state_.FindIteration(task.iteration_id);
  if (iteration->error_code != 0 || iteration->collected) return;
  // A shutdown is not a crash, nor is a worker that lives but that clients
  // cannot reach.
  const bool may_be_crash = reason != "worker shut down" && !absl::StartsWith(reason, kUnreachableReason);
  if (std::optional<std::string> cause = core_.crash_loop_.CountLoss(task, reason, may_be_crash, lived);
      cause.has_value()) {
    FailIteration(task.iteration_id, absl::StatusCode::kInternal, *cause);
  }
}

void Liveness::NoteUnreachable(int64_t iteration_id, const std::string& address, NewTasks* new_tasks) {
  if (core_.state_.FindWorker(address) == nullptr) return;
  // Workers are shared by tenants, and any client can send a report: only
  // a reader with a task of its own iteration there is heard, and only
  // about that task. An address it has none on is ignored, not refused: an
  // honest reader may report a task that just ended.
  const auto* iteration = core_.state_.FindIteration(iteration_id);
  if (iteration == nullptr || iteration->collected || iteration->error_code != 0) return;
  std::vector<int64_t> reported;
  for (int64_t id : iteration->tasks) {
    const auto* task = core_.state_.FindTask(id);
    // A task its worker finished may still hold elements the reader needs.
    if (task->worker_address == address && !task->lost && !task->completed) reported.push_back(id);
  }
  if (reported.empty()) return;
  const auto now = Clock::now();
  const std::optional<Clock::time_point> heard = core_.worker_activity_.LastHeard(address);
  if (!heard.has_value() || now - *heard >= kUnreachableWorkerSilence) {
    // Silent as well: it is about to time out anyway.
    spdlog::warn("worker {}: a client cannot reach it and it is silent; removed, its tasks end", address);
    RemoveWorker(address, "unreachable from a client and silent", new_tasks);
    return;
  }
  // It heartbeats, so it lives, but this iteration's readers cannot reach
  // it at the address it gave (a wrong advertised_address, a firewall, or
  // a network path of theirs only): after as long as a silent worker would
  // get, this iteration's tasks there end so that its reads can finish.
  // The worker stays, and so do other iterations' tasks on it.
  auto [reports, inserted] = unreachable_reports_.try_emplace({iteration_id, address}, now, now);
  if (!inserted && now - reports->second.second > kUnreachableWorkerSilence) reports->second.first = now;
  reports->second.second = now;
  const auto reported_for = now - reports->second.first;
  if (reported_for < std::chrono::milliseconds(core_.config_.worker_timeout_ms)) return;
  unreachable_reports_.erase(reports);
  const std::string reason =
      absl::StrCat(kUnreachableReason, " for ",
                   std::chrono::duration_cast<std::chrono::milliseconds>(reported_for).count(),
                   " ms though it heartbeats (check its advertised_address)");
  spdlog::warn(
      "worker {}: {}; the tasks there of iteration {} end ({}), the worker and other iterations' "
      "tasks stay",
      address, reason, iteration_id, absl::StrJoin(reported, ", "));
  FailBrokenSharedReads(reported, reason);
  const int64_t returned_before = SplitsAwaitingReissue(core_.state_);
  const std::map<int64_t, int64_t> holds_before = HoldsOf(reported);
  std::vector<int64_t> running;
  for (int64_t id : reported) {
    const bool was_running = !core_.state_.FindTask(id)->finished;
    proto::Update update;
    update.mutable_lose_task()->set_task_id(id);
    update.mutable_lose_task()->set_reason(reason);
    if (!core_.ApplyOrLog(update, absl::StrCat("ending task ", id, " on ", address))) return;
    if (was_running) running.push_back(id);
  }
  LogNewHolds(holds_before);
  ReturnedSplitsCounter().Increment(
      static_cast<double>(std::max<int64_t>(SplitsAwaitingReissue(core_.state_) - returned_before, 0)));
  for (int64_t id : running) NoteLostTask(*core_.state_.FindTask(id), reason, now);
  // MayRunIn keeps this iteration off the worker from now on.
  AssignReturnedSplits(new_tasks);
}

std::map<int64_t, int64_t> Liveness::HoldsOf(const std::vector<int64_t>& tasks) const {
  std::map<int64_t, int64_t> holds;
  for (int64_t id : tasks) {
    const int64_t iteration = core_.state_.FindTask(id)->iteration_id;
    holds.emplace(iteration, core_.state_.FindIteration(iteration)->hold);
  }
  return holds;
}

void Liveness::LogNewHolds(const std::map<int64_t, int64_t>& holds_before) const {
  for (const auto& [id, before] : holds_before) {
    const auto* iteration = core_.state_.FindIteration(id);
    if (iteration->hold == before || iteration->awaiting_reports.empty()) continue;
    spdlog::info(
        "iteration {}: {} splits of lost tasks are held until its {} clients say which of their elements "
        "they "
        "took (shared exactly_once read, hold {})",
        id, CountSplits(iteration->held_splits), iteration->awaiting_reports.size(), iteration->hold);
  }
}

void Liveness::FailBrokenSharedReads(const std::vector<int64_t>& tasks, const std::string& reason) {
  for (int64_t id : tasks) {
    const auto* task = core_.state_.FindTask(id);
    if (task == nullptr) continue;
    if (std::optional<std::string> why = SharedExactlyOnceBreak(core_.state_, *task, reason);
        why.has_value()) {
      FailIteration(task->iteration_id, absl::StatusCode::kAborted, *why);
    }
  }
}

void Liveness::AssignReturnedSplits(NewTasks* new_tasks) {
  std::vector<int64_t> orphaned;
  for (const auto& [id, iteration] : core_.state_.iterations()) {
    if (iteration.collected || iteration.error_code != 0 || !core_.state_.HasUnreadSplits(iteration))
      continue;
    // Held splits wait for their clients' reports, not for a task.
    if (iteration.returned_splits.empty() && !iteration.held_splits.empty() && iteration.splits_exhausted)
      continue;
    const bool has_taker =
        std::any_of(iteration.tasks.begin(), iteration.tasks.end(), [this](int64_t task_id) {
          const auto* task = core_.state_.FindTask(task_id);
          return !task->finished && !task->last_end_of_splits && !task->drained &&
                 core_.state_.FindWorker(task->worker_address) != nullptr;
        });
    if (!has_taker) orphaned.push_back(id);
  }
  for (int64_t id : orphaned) {
    std::string least_busy;
    size_t fewest = SIZE_MAX;
    for (const auto& [address, worker] : core_.state_.workers()) {
      if (!core_.MayRunIn(*core_.state_.FindIteration(id), address)) continue;
      size_t running = 0;
      for (const auto* task : core_.state_.TasksOfWorker(address)) running += task->finished ? 0 : 1;
      if (running < fewest) {
        fewest = running;
        least_busy = address;
      }
    }
    // With no worker that may run it, the next one to register gets a task;
    // other iterations may still have one.
    if (least_busy.empty()) continue;
    const int64_t task_id = core_.state_.NextTaskId();
    if (absl::Status s = core_.CreateTask(id, least_busy); !s.ok()) {
      spdlog::error("iteration {}: making a task on {} for its returned splits: {}", id, least_busy,
                    std::string(s.message()));
      continue;
    }
    core_.FillTaskDef(*core_.state_.FindTask(task_id),
                      &new_tasks->emplace_back(least_busy, proto::TaskDef()).second);
    const auto* iteration = core_.state_.FindIteration(id);
    spdlog::info("iteration {}: task {} on {} takes {} returned splits{}", id, task_id, least_busy,
                 CountSplits(iteration->returned_splits),
                 iteration->splits_exhausted ? "" : " and the splits not yet handed out");
  }
}

void Liveness::FailIteration(int64_t iteration_id, absl::StatusCode code, const std::string& message) {
  proto::Update update;
  auto* u = update.mutable_fail_iteration();
  u->set_iteration_id(iteration_id);
  u->set_code(static_cast<int>(code));
  u->set_message(message);
  if (!core_.ApplyOrLog(update, absl::StrCat("failing iteration ", iteration_id))) return;
  spdlog::warn("iteration {} failed: {}", iteration_id, message);
  ForgetIteration(iteration_id);
}

void Liveness::ForgetIteration(int64_t iteration_id) {
  core_.split_leaser_.Forget(iteration_id);
  core_.crash_loop_.ForgetIteration(iteration_id);
  unreachable_reports_.erase(unreachable_reports_.lower_bound({iteration_id, ""}),
                             unreachable_reports_.lower_bound({iteration_id + 1, ""}));
  iteration_idle_since_.erase(iteration_id);
  if (const auto* iteration = core_.state_.FindIteration(iteration_id); iteration != nullptr) {
    for (int64_t task : iteration->tasks) {
      core_.crash_loop_.ForgetTask(task);
      core_.task_read_secrets_.erase(task);
    }
  }
}

bool Liveness::ReleaseSilentClients(Clock::time_point now) {
  const auto client_timeout = std::chrono::milliseconds(core_.config_.client_timeout_ms);
  bool released_any = false;
  for (int64_t client : core_.client_activity_.Silent(now, client_timeout)) {
    const std::optional<int64_t> iteration = core_.state_.IterationOfClient(client);
    // The last hold it answered: one it is awaited for goes on without it.
    int64_t answered_hold = 0;
    if (iteration.has_value()) {
      const auto* released = core_.state_.FindIteration(*iteration);
      answered_hold = released->hold - (released->awaiting_reports.contains(client) ? 1 : 0);
    }
    core_.client_activity_.Release(client, iteration, answered_hold);
    if (!iteration.has_value()) continue;
    spdlog::warn(
        "iteration client {} silent for {} ms (client_timeout_ms): released; taken back if it "
        "returns before its iteration is collected",
        client, core_.config_.client_timeout_ms);
    proto::Update update;
    update.mutable_release_iteration_client()->set_iteration_client_id(client);
    released_any |= core_.ApplyOrLog(update, absl::StrCat("releasing silent client ", client));
  }
  return released_any;
}

absl::StatusOr<int64_t> Liveness::ResumeReleasedClient(int64_t iteration_client_id) {
  const ClientActivity::Released* released = core_.client_activity_.FindReleased(iteration_client_id);
  if (released == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown iteration client ", iteration_client_id,
                                            " (never given out, or already released)"));
  }
  const DispatcherState::Iteration* iteration = core_.state_.FindIteration(released->iteration_id);
  if (iteration == nullptr || iteration->collected) {
    return absl::NotFoundError(absl::StrCat(
        "iteration client ", iteration_client_id, " was released after ", core_.config_.client_timeout_ms,
        " ms without a heartbeat (client_timeout_ms), and its iteration ", released->iteration_id,
        " was then collected after ", core_.config_.job_gc_timeout_ms,
        " ms without clients (job_gc_timeout_ms): raise client_timeout_ms on the dispatcher for trainers "
        "that "
        "pause longer (evaluation, checkpoints)"));
  }
  // Kept released, so that its peers' reads end with DataLoss rather than
  // whole (ClientRpcs::CheckPeersAtEnd).
  if (released->took_tasks && iteration->hold != released->hold) {
    return absl::FailedPreconditionError(absl::StrCat(
        "iteration client ", iteration_client_id, " was released after ", core_.config_.client_timeout_ms,
        " ms without a heartbeat (client_timeout_ms), and its shared exactly_once read (iteration ",
        iteration->id,
        ") has since lost a task whose splits ran again without knowing what this client took of them: "
        "it may not come back, or elements would repeat; raise client_timeout_ms on the dispatcher for "
        "trainers that pause longer"));
  }
  proto::Update acquire;
  acquire.mutable_acquire_iteration_client()->set_iteration_client_id(iteration_client_id);
  acquire.mutable_acquire_iteration_client()->set_iteration_id(iteration->id);
  acquire.mutable_acquire_iteration_client()->set_consumer_index(released->consumer_index);
  if (absl::Status s = core_.Apply(acquire); !s.ok()) return s;
  spdlog::info("iteration client {} is back after a pause; it continues iteration {}", iteration_client_id,
               iteration->id);
  const int64_t id = iteration->id;
  core_.client_activity_.TakeBack(iteration_client_id);
  return id;
}

void Liveness::CollectAbandonedIterations(Clock::time_point now) {
  std::vector<int64_t> abandoned;
  for (const auto& [id, iteration] : core_.state_.iterations()) {
    const bool idle = !iteration.collected && iteration.clients.empty();
    if (IdleFor(iteration_idle_since_, id, idle, now,
                std::chrono::milliseconds(core_.config_.job_gc_timeout_ms))) {
      abandoned.push_back(id);
    }
  }
  for (int64_t id : abandoned) {
    proto::Update update;
    update.mutable_garbage_collect_iteration()->set_iteration_id(id);
    if (!core_.ApplyOrLog(update, absl::StrCat("collecting iteration ", id))) continue;
    ForgetIteration(id);
    spdlog::info("iteration {} had no clients for {} ms: collected, its tasks dropped", id,
                 core_.config_.job_gc_timeout_ms);
  }
}

void Liveness::CollectFinishedJobs(Clock::time_point now) {
  const auto timeout = std::chrono::milliseconds(core_.config_.job_retention_ms);
  std::vector<int64_t> jobs;
  for (const auto& [id, job] : core_.state_.jobs()) {
    const bool over = std::all_of(job.iterations.begin(), job.iterations.end(), [&](const auto& entry) {
      const auto* iteration = core_.state_.FindIteration(entry.second);
      return iteration->finished && iteration->clients.empty();
    });
    if (IdleFor(job_idle_since_, id, over, now, timeout)) jobs.push_back(id);
  }
  for (int64_t id : jobs) {
    std::vector<int64_t> iterations;
    for (const auto& [repetition, iteration] : core_.state_.FindJob(id)->iterations) {
      iterations.push_back(iteration);
      for (int64_t task : core_.state_.FindIteration(iteration)->tasks) core_.crash_loop_.ForgetTask(task);
    }
    proto::Update update;
    update.mutable_remove_job()->set_job_id(id);
    if (!core_.ApplyOrLog(update, absl::StrCat("collecting job ", id))) continue;
    job_idle_since_.erase(id);
    for (int64_t iteration : iterations) {
      ForgetIteration(iteration);
      core_.iteration_rounds_.erase(iteration);
      core_.client_activity_.ForgetReleasedOf(iteration);
    }
    spdlog::info("job {} was over for {} ms: removed with its {} iterations", id,
                 core_.config_.job_retention_ms, iterations.size());
  }
  std::vector<std::string> datasets;
  for (const auto& [id, dataset] : core_.state_.datasets()) {
    const bool used = std::any_of(core_.state_.jobs().begin(), core_.state_.jobs().end(),
                                  [&](const auto& job) { return job.second.params.dataset_id() == id; });
    if (IdleFor(dataset_idle_since_, id, !used, now, timeout)) datasets.push_back(id);
  }
  for (const std::string& id : datasets) {
    proto::Update update;
    update.mutable_remove_dataset()->set_dataset_id(id);
    if (!core_.ApplyOrLog(update, absl::StrCat("collecting dataset ", id))) continue;
    dataset_idle_since_.erase(id);
    core_.built_datasets_.erase(id);
    core_.source_splits_.erase(id);
    spdlog::info("dataset {} was unused for {} ms: removed", id, core_.config_.job_retention_ms);
  }
}

}  // namespace sluice::dispatcher
