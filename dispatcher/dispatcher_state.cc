#include "dispatcher/dispatcher_state.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::dispatcher {

absl::Status DispatcherState::Apply(const proto::Update& update) {
  switch (update.kind_case()) {
    case proto::Update::kRegisterDataset: {
      const auto& u = update.register_dataset();
      if (datasets_.contains(u.dataset_id())) {
        return absl::FailedPreconditionError(absl::StrCat("dataset ", u.dataset_id(), " already exists"));
      }
      datasets_[u.dataset_id()] = Dataset{u.dataset_id(), u.fingerprint(), u.dataset()};
      dataset_by_fingerprint_.emplace(u.fingerprint(), u.dataset_id());
      int64_t numeric = 0;
      if (absl::SimpleAtoi(u.dataset_id(), &numeric))
        next_dataset_id_ = std::max(next_dataset_id_, numeric + 1);
      return absl::OkStatus();
    }
    case proto::Update::kRegisterWorker: {
      const auto& u = update.register_worker();
      workers_[u.address()] = Worker{u.address(), {u.tags().begin(), u.tags().end()}};
      return absl::OkStatus();
    }
    case proto::Update::kCreateJob: {
      const auto& u = update.create_job();
      if (jobs_.contains(u.job_id()) || !datasets_.contains(u.params().dataset_id())) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create job ", u.job_id()));
      }
      if (!u.params().job_name().empty() && job_by_name_.contains(u.params().job_name())) {
        return absl::FailedPreconditionError(absl::StrCat("job name '", u.params().job_name(), "' is taken"));
      }
      jobs_[u.job_id()] = Job{u.job_id(), u.params(), {}};
      if (!u.params().job_name().empty()) job_by_name_[u.params().job_name()] = u.job_id();
      next_job_id_ = std::max(next_job_id_, u.job_id() + 1);
      return absl::OkStatus();
    }
    case proto::Update::kCreateIteration: {
      const auto& u = update.create_iteration();
      auto job = jobs_.find(u.job_id());
      if (job == jobs_.end() || iterations_.contains(u.iteration_id()) || u.repetition() < 0 ||
          FindIterationForRepetition(u.job_id(), u.repetition()) != nullptr) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create iteration ", u.iteration_id()));
      }
      Iteration iteration;
      iteration.id = u.iteration_id();
      iteration.job_id = u.job_id();
      iteration.repetition = u.repetition();
      iterations_[u.iteration_id()] = iteration;
      if (static_cast<int64_t>(job->second.iterations.size()) <= u.repetition()) {
        job->second.iterations.resize(u.repetition() + 1, 0);
      }
      job->second.iterations[u.repetition()] = u.iteration_id();
      next_iteration_id_ = std::max(next_iteration_id_, u.iteration_id() + 1);
      return absl::OkStatus();
    }
    case proto::Update::kCreateTask: {
      const auto& u = update.create_task();
      auto iteration = iterations_.find(u.iteration_id());
      if (iteration == iterations_.end() || tasks_.contains(u.task_id()) ||
          !workers_.contains(u.worker_address())) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create task ", u.task_id()));
      }
      tasks_[u.task_id()] = Task{u.task_id(), u.iteration_id(), u.worker_address(), false};
      iteration->second.tasks.push_back(u.task_id());
      UpdateFinished(iteration->second);
      next_task_id_ = std::max(next_task_id_, u.task_id() + 1);
      return absl::OkStatus();
    }
    case proto::Update::kAcquireIterationClient: {
      const auto& u = update.acquire_iteration_client();
      auto iteration = iterations_.find(u.iteration_id());
      if (iteration == iterations_.end() || iteration_of_client_.contains(u.iteration_client_id())) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot add client ", u.iteration_client_id(), " to iteration ", u.iteration_id()));
      }
      iteration->second.clients.insert(u.iteration_client_id());
      iteration_of_client_[u.iteration_client_id()] = u.iteration_id();
      next_iteration_client_id_ = std::max(next_iteration_client_id_, u.iteration_client_id() + 1);
      return absl::OkStatus();
    }
    case proto::Update::kReleaseIterationClient: {
      const auto& u = update.release_iteration_client();
      auto client = iteration_of_client_.find(u.iteration_client_id());
      if (client == iteration_of_client_.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("unknown iteration client ", u.iteration_client_id()));
      }
      iterations_[client->second].clients.erase(u.iteration_client_id());
      iteration_of_client_.erase(client);
      return absl::OkStatus();
    }
    case proto::Update::kFinishTask: {
      auto task = tasks_.find(update.finish_task().task_id());
      if (task == tasks_.end()) {
        return absl::FailedPreconditionError(absl::StrCat("unknown task ", update.finish_task().task_id()));
      }
      task->second.finished = true;
      UpdateFinished(iterations_[task->second.iteration_id]);
      return absl::OkStatus();
    }
    case proto::Update::kRemoveWorker: {
      // A removed worker's tasks are over: their clients stop waiting.
      const std::string& address = update.remove_worker().address();
      workers_.erase(address);
      for (auto& [id, task] : tasks_) {
        if (task.worker_address == address && !task.finished) {
          task.finished = true;
          task.lost = true;
          UpdateFinished(iterations_[task.iteration_id]);
        }
      }
      return absl::OkStatus();
    }
    case proto::Update::kGarbageCollectIteration: {
      auto iteration = iterations_.find(update.garbage_collect_iteration().iteration_id());
      if (iteration == iterations_.end() || !iteration->second.clients.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot collect iteration ", update.garbage_collect_iteration().iteration_id()));
      }
      iteration->second.collected = true;
      iteration->second.finished = true;
      return absl::OkStatus();
    }
    case proto::Update::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("empty update");
}

void DispatcherState::UpdateFinished(Iteration& iteration) {
  const bool all_tasks_finished =
      !iteration.tasks.empty() && std::all_of(iteration.tasks.begin(), iteration.tasks.end(),
                                              [this](int64_t id) { return tasks_.at(id).finished; });
  iteration.finished = iteration.collected || all_tasks_finished;
}

const DispatcherState::Dataset* DispatcherState::FindDataset(const std::string& id) const {
  auto it = datasets_.find(id);
  return it == datasets_.end() ? nullptr : &it->second;
}

const DispatcherState::Dataset* DispatcherState::FindDatasetByFingerprint(
    const std::string& fingerprint) const {
  auto it = dataset_by_fingerprint_.find(fingerprint);
  return it == dataset_by_fingerprint_.end() ? nullptr : FindDataset(it->second);
}

const DispatcherState::Job* DispatcherState::FindJob(int64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const DispatcherState::Job* DispatcherState::FindJobByName(const std::string& name) const {
  auto it = job_by_name_.find(name);
  return it == job_by_name_.end() ? nullptr : FindJob(it->second);
}

const DispatcherState::Iteration* DispatcherState::FindIteration(int64_t id) const {
  auto it = iterations_.find(id);
  return it == iterations_.end() ? nullptr : &it->second;
}

const DispatcherState::Iteration* DispatcherState::FindIterationForRepetition(int64_t job_id,
                                                                              int64_t repetition) const {
  const Job* job = FindJob(job_id);
  if (job == nullptr || repetition < 0 || repetition >= static_cast<int64_t>(job->iterations.size()) ||
      job->iterations[repetition] == 0) {
    return nullptr;
  }
  return FindIteration(job->iterations[repetition]);
}

std::optional<int64_t> DispatcherState::IterationOfClient(int64_t iteration_client_id) const {
  auto it = iteration_of_client_.find(iteration_client_id);
  if (it == iteration_of_client_.end()) return std::nullopt;
  return it->second;
}

const DispatcherState::Task* DispatcherState::FindTask(int64_t id) const {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : &it->second;
}

const DispatcherState::Worker* DispatcherState::FindWorker(const std::string& address) const {
  auto it = workers_.find(address);
  return it == workers_.end() ? nullptr : &it->second;
}

std::vector<const DispatcherState::Task*> DispatcherState::TasksOfWorker(const std::string& address) const {
  std::vector<const Task*> result;
  for (const auto& [id, task] : tasks_) {
    if (task.worker_address == address) result.push_back(&task);
  }
  return result;
}

}  // namespace sluice::dispatcher
