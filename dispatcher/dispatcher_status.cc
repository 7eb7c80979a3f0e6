// DispatcherImpl's status RPCs: the workers, and everything the state
// holds, for the CLI and for operators.
#include <cstdint>

#include "dispatcher/dispatcher_impl.h"
#include "service/grpc_util.h"

namespace sluice::dispatcher {

bool DispatcherImpl::MaySeeIteration(const Caller& caller, int64_t iteration_id) const {
  if (caller.SeesAll()) return true;
  const auto* iteration = state_.FindIteration(iteration_id);
  return iteration != nullptr && caller.MaySee(state_.FindJob(iteration->job_id)->params.tenant());
}

void DispatcherImpl::FillWorkerInfo(const DispatcherState::Worker& worker, proto::WorkerInfo* info,
                                    const Caller& caller) const {
  info->set_address(worker.address);
  for (const std::string& tag : worker.tags) info->add_tags(tag);
  for (const auto* task : state_.TasksOfWorker(worker.address)) {
    if (!task->finished && MaySeeIteration(caller, task->iteration_id)) info->add_tasks(task->id);
  }
  auto heartbeat = worker_heartbeat_unix_ms_.find(worker.address);
  if (heartbeat != worker_heartbeat_unix_ms_.end()) info->set_last_heartbeat_unix_ms(heartbeat->second);
}

absl::Status DispatcherImpl::GetWorkers(const proto::GetWorkersRequest& request,
                                        proto::GetWorkersResponse* response, const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (const auto& [address, worker] : state_.workers())
    FillWorkerInfo(worker, response->add_workers(), caller);
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetStatus(const proto::GetStatusRequest& request,
                                       proto::StatusSnapshot* response, const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  // A tenant sees the workers (which serve every tenant), and only its
  // own datasets, jobs, iterations and tasks.
  for (const auto& [address, worker] : state_.workers())
    FillWorkerInfo(worker, response->add_workers(), caller);
  for (const auto& [id, dataset] : state_.datasets()) {
    if (!caller.MaySee(dataset.tenant)) continue;
    auto* d = response->add_datasets();
    d->set_dataset_id(id);
    d->set_fingerprint(dataset.fingerprint);
  }
  for (const auto& [id, job] : state_.jobs()) {
    if (!caller.MaySee(job.params.tenant())) continue;
    auto* j = response->add_jobs();
    j->set_job_id(id);
    *j->mutable_params() = job.params;
  }
  for (const auto& [id, iteration] : state_.iterations()) {
    if (!MaySeeIteration(caller, id)) continue;
    auto* i = response->add_iterations();
    i->set_iteration_id(id);
    i->set_job_id(iteration.job_id);
    i->set_repetition(iteration.repetition);
    i->set_finished(iteration.finished);
    i->set_num_clients(static_cast<int64_t>(iteration.clients.size()));
    i->set_collected(iteration.collected);
  }
  for (const auto& [id, task] : state_.tasks()) {
    if (!MaySeeIteration(caller, task.iteration_id)) continue;
    auto* t = response->add_tasks();
    t->set_task_id(id);
    t->set_iteration_id(task.iteration_id);
    t->set_worker_address(task.worker_address);
  }
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
