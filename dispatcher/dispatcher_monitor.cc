// DispatcherImpl's monitor thread and what it does: workers that stopped
// heartbeating, clients that went silent (and taking them back), and the
// collection of abandoned iterations, finished jobs and unused datasets;
// with the status RPCs that report the result.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dispatcher/dispatcher_impl.h"
#include "service/grpc_util.h"

namespace sluice::dispatcher {

absl::StatusOr<int64_t> DispatcherImpl::ResumeReleasedClient(int64_t iteration_client_id) {
  auto released = released_clients_.find(iteration_client_id);
  if (released == released_clients_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown iteration client ", iteration_client_id,
                                            " (never given out, or already released)"));
  }
  const DispatcherState::Iteration* iteration = state_.FindIteration(released->second.iteration_id);
  if (iteration == nullptr || iteration->collected) {
    return absl::NotFoundError(absl::StrCat(
        "iteration client ", iteration_client_id, " was released after ", config_.client_timeout_ms,
        " ms without a heartbeat (client_timeout_ms), and its iteration ", released->second.iteration_id,
        " was then collected after ", config_.job_gc_timeout_ms,
        " ms without clients (job_gc_timeout_ms): raise client_timeout_ms on the dispatcher for trainers "
        "that "
        "pause longer (evaluation, checkpoints)"));
  }
  proto::Update acquire;
  acquire.mutable_acquire_iteration_client()->set_iteration_client_id(iteration_client_id);
  acquire.mutable_acquire_iteration_client()->set_iteration_id(iteration->id);
  acquire.mutable_acquire_iteration_client()->set_consumer_index(released->second.consumer_index);
  if (absl::Status s = Apply(acquire); !s.ok()) return s;
  spdlog::info("iteration client {} is back after a pause; it continues iteration {}", iteration_client_id,
               iteration->id);
  const int64_t id = iteration->id;
  released_clients_.erase(released);
  return id;
}

void DispatcherImpl::FillWorkerInfo(const DispatcherState::Worker& worker, proto::WorkerInfo* info) const {
  info->set_address(worker.address);
  for (const std::string& tag : worker.tags) info->add_tags(tag);
  for (const auto* task : state_.TasksOfWorker(worker.address)) {
    if (!task->finished) info->add_tasks(task->id);
  }
  auto heartbeat = worker_heartbeat_unix_ms_.find(worker.address);
  if (heartbeat != worker_heartbeat_unix_ms_.end()) info->set_last_heartbeat_unix_ms(heartbeat->second);
}

absl::Status DispatcherImpl::GetWorkers(const proto::GetWorkersRequest& request,
                                        proto::GetWorkersResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (const auto& [address, worker] : state_.workers()) FillWorkerInfo(worker, response->add_workers());
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetStatus(const proto::GetStatusRequest& request,
                                       proto::StatusSnapshot* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (const auto& [address, worker] : state_.workers()) FillWorkerInfo(worker, response->add_workers());
  for (const auto& [id, dataset] : state_.datasets()) {
    auto* d = response->add_datasets();
    d->set_dataset_id(id);
    d->set_fingerprint(dataset.fingerprint);
  }
  for (const auto& [id, job] : state_.jobs()) {
    auto* j = response->add_jobs();
    j->set_job_id(id);
    *j->mutable_params() = job.params;
  }
  for (const auto& [id, iteration] : state_.iterations()) {
    auto* i = response->add_iterations();
    i->set_iteration_id(id);
    i->set_job_id(iteration.job_id);
    i->set_repetition(iteration.repetition);
    i->set_finished(iteration.finished);
    i->set_num_clients(static_cast<int64_t>(iteration.clients.size()));
    i->set_collected(iteration.collected);
  }
  for (const auto& [id, task] : state_.tasks()) {
    auto* t = response->add_tasks();
    t->set_task_id(id);
    t->set_iteration_id(task.iteration_id);
    t->set_worker_address(task.worker_address);
  }
  return absl::OkStatus();
}

void DispatcherImpl::CollectAbandonedIterations(Clock::time_point now) {
  std::vector<int64_t> abandoned;
  for (const auto& [id, iteration] : state_.iterations()) {
    if (iteration.collected || !iteration.clients.empty()) {
      iteration_idle_since_.erase(id);
      continue;
    }
    auto [since, inserted] = iteration_idle_since_.try_emplace(id, now);
    if (!inserted && now - since->second >= std::chrono::milliseconds(config_.job_gc_timeout_ms)) {
      abandoned.push_back(id);
    }
  }
  for (int64_t id : abandoned) {
    proto::Update update;
    update.mutable_garbage_collect_iteration()->set_iteration_id(id);
    if (absl::Status s = Apply(update); !s.ok()) continue;
    ForgetIteration(id);
    spdlog::info("iteration {} had no clients for {} ms: collected, its tasks dropped", id,
                 config_.job_gc_timeout_ms);
  }
}

void DispatcherImpl::CollectFinishedJobs(Clock::time_point now) {
  const auto timeout = std::chrono::milliseconds(config_.job_retention_ms);
  std::vector<int64_t> jobs;
  for (const auto& [id, job] : state_.jobs()) {
    const bool over = std::all_of(job.iterations.begin(), job.iterations.end(), [&](const auto& entry) {
      const auto* iteration = state_.FindIteration(entry.second);
      return iteration->finished && iteration->clients.empty();
    });
    if (!over) {
      job_idle_since_.erase(id);
      continue;
    }
    auto [since, inserted] = job_idle_since_.try_emplace(id, now);
    if (!inserted && now - since->second >= timeout) jobs.push_back(id);
  }
  for (int64_t id : jobs) {
    std::vector<int64_t> iterations;
    for (const auto& [repetition, iteration] : state_.FindJob(id)->iterations) {
      iterations.push_back(iteration);
      for (int64_t task : state_.FindIteration(iteration)->tasks) task_started_.erase(task);
    }
    proto::Update update;
    update.mutable_remove_job()->set_job_id(id);
    if (absl::Status s = Apply(update); !s.ok()) {
      spdlog::error("collecting job {}: {}", id, std::string(s.message()));
      continue;
    }
    job_idle_since_.erase(id);
    for (int64_t iteration : iterations) {
      ForgetIteration(iteration);
      iteration_rounds_.erase(iteration);
      for (auto client = released_clients_.begin(); client != released_clients_.end();) {
        client =
            client->second.iteration_id == iteration ? released_clients_.erase(client) : std::next(client);
      }
    }
    spdlog::info("job {} was over for {} ms: removed with its {} iterations", id, config_.job_retention_ms,
                 iterations.size());
  }
  std::vector<std::string> datasets;
  for (const auto& [id, dataset] : state_.datasets()) {
    const bool used = std::any_of(state_.jobs().begin(), state_.jobs().end(),
                                  [&](const auto& job) { return job.second.params.dataset_id() == id; });
    if (used) {
      dataset_idle_since_.erase(id);
      continue;
    }
    auto [since, inserted] = dataset_idle_since_.try_emplace(id, now);
    if (!inserted && now - since->second >= timeout) datasets.push_back(id);
  }
  for (const std::string& id : datasets) {
    proto::Update update;
    update.mutable_remove_dataset()->set_dataset_id(id);
    if (absl::Status s = Apply(update); !s.ok()) {
      spdlog::error("collecting dataset {}: {}", id, std::string(s.message()));
      continue;
    }
    dataset_idle_since_.erase(id);
    built_datasets_.erase(id);
    spdlog::info("dataset {} was unused for {} ms: removed", id, config_.job_retention_ms);
  }
}

void DispatcherImpl::RemoveLostWorkers() {
  const auto timeout = std::chrono::milliseconds(config_.worker_timeout_ms);
  const auto client_timeout = std::chrono::milliseconds(config_.client_timeout_ms);
  while (true) {
    std::vector<std::pair<std::string, proto::TaskDef>> new_tasks;
    {
      absl::MutexLock lock(&mu_);
      // Wakes at least ten times per timeout, or at once on shutdown.
      mu_.AwaitWithTimeout(
          absl::Condition(&stopping_),
          absl::Milliseconds(std::min(config_.worker_timeout_ms, config_.job_gc_timeout_ms) / 10));
      if (stopping_) return;
      const auto now = Clock::now();
      CollectAbandonedIterations(now);
      CollectFinishedJobs(now);
      std::vector<std::string> lost;
      for (const auto& [address, last] : worker_heartbeats_) {
        if (now - last > timeout) lost.push_back(address);
      }
      for (const std::string& address : lost) {
        spdlog::warn("worker {} missed heartbeats for {} ms; removed, its tasks end", address,
                     config_.worker_timeout_ms);
        RemoveWorker(address, absl::StrCat("no heartbeat for ", config_.worker_timeout_ms, " ms"),
                     &new_tasks);
      }
      std::vector<int64_t> silent;
      for (const auto& [client, last] : client_heartbeats_) {
        if (now - last > client_timeout) silent.push_back(client);
      }
      for (int64_t client : silent) {
        client_heartbeats_.erase(client);
        const std::optional<int64_t> iteration = state_.IterationOfClient(client);
        if (!iteration.has_value()) continue;
        auto index = client_consumer_index_.find(client);
        released_clients_[client] = {*iteration, index == client_consumer_index_.end() ? -1 : index->second};
        // Bounded: the oldest are forgotten first (their returning clients
        // then get the shorter "unknown iteration client").
        if (released_clients_.size() > kMaxReleasedClientsKept)
          released_clients_.erase(released_clients_.begin());
        spdlog::warn(
            "iteration client {} silent for {} ms (client_timeout_ms): released; taken back if it "
            "returns before its iteration is collected",
            client, config_.client_timeout_ms);
        proto::Update update;
        update.mutable_release_iteration_client()->set_iteration_client_id(client);
        if (absl::Status s = Apply(update); !s.ok()) {
          spdlog::error("releasing silent client {}: {}", client, std::string(s.message()));
        }
      }
    }
    PushTasks(new_tasks);
  }
}

}  // namespace sluice::dispatcher
