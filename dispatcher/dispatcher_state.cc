#include "dispatcher/dispatcher_state.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "pipeline/split_provider.h"

namespace sluice::dispatcher {

int64_t CountSplits(const SplitRuns& runs) {
  int64_t count = 0;
  for (const auto& [seq, run] : runs) count += run.count;
  return count;
}

bool RemoveSplits(SplitRuns* runs, int64_t seq, int64_t count) {
  auto holder = runs->upper_bound(seq);
  if (holder == runs->begin()) return false;
  --holder;
  const Split run = holder->second;
  const int64_t first = seq - run.seq;
  if (count <= 0 || first + count > run.count) return false;
  runs->erase(holder);
  if (first > 0) (*runs)[run.seq] = SplitRunPart(run, 0, first);
  if (const int64_t after = run.count - first - count; after > 0) {
    const Split rest = SplitRunPart(run, first + count, after);
    (*runs)[rest.seq] = rest;
  }
  return true;
}

bool HoldsSplit(const SplitRuns& runs, int64_t seq) {
  auto holder = runs.upper_bound(seq);
  if (holder == runs.begin()) return false;
  --holder;
  return seq - holder->second.seq < holder->second.count;
}

namespace {

// Ids are positive, and below the largest int64 so that the next id
// (id + 1) cannot overflow.
bool ValidId(int64_t id) { return id > 0 && id < INT64_MAX; }

// A leased run as the state may hold it: numbered from 1, at least one
// split (count 0 means 1), positions in order, a split size for a run, and
// no seq or position past int64.
bool ValidLease(const proto::SplitLease& lease) {
  const Split run = SplitFromMessage(lease);
  return lease.count() >= 0 && run.seq > 0 && run.seq <= INT64_MAX - run.count && run.begin >= 0 &&
         run.begin <= run.end && ValidSplitRunSize(run);
}

}  // namespace

// Every case checks everything it needs before it changes anything, so a
// refused update leaves the state as it was (dispatcher_hardening_test).
absl::Status DispatcherState::Apply(const proto::Update& update) {
  switch (update.kind_case()) {
    case proto::Update::kRegisterDataset: {
      const auto& u = update.register_dataset();
      if (u.dataset_id().empty()) return absl::FailedPreconditionError("a dataset needs an id");
      if (datasets_.contains(u.dataset_id())) {
        return absl::FailedPreconditionError(absl::StrCat("dataset ", u.dataset_id(), " already exists"));
      }
      // Only the id the dispatcher gives moves the counter: an explicit
      // number (which journals from before request_checks refused them
      // may hold) never takes later registrations' ids away.
      int64_t numeric = 0;
      if (u.dataset_id() == NextDatasetId() && absl::SimpleAtoi(u.dataset_id(), &numeric) &&
          numeric < INT64_MAX) {
        next_dataset_id_ = numeric + 1;
      }
      datasets_[u.dataset_id()] = Dataset{u.dataset_id(), u.fingerprint(), u.dataset(), u.tenant()};
      dataset_by_fingerprint_.emplace(std::make_pair(u.tenant(), u.fingerprint()), u.dataset_id());
      return absl::OkStatus();
    }
    case proto::Update::kRegisterWorker: {
      const auto& u = update.register_worker();
      if (u.address().empty()) return absl::FailedPreconditionError("a worker needs an address");
      workers_[u.address()] = Worker{u.address(), {u.tags().begin(), u.tags().end()}, u.incarnation()};
      return absl::OkStatus();
    }
    case proto::Update::kCreateJob: {
      const auto& u = update.create_job();
      if (!ValidId(u.job_id()) || jobs_.contains(u.job_id()) ||
          !datasets_.contains(u.params().dataset_id())) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create job ", u.job_id()));
      }
      const auto name = std::make_pair(u.params().tenant(), u.params().job_name());
      if (!u.params().job_name().empty() && job_by_name_.contains(name)) {
        return absl::FailedPreconditionError(absl::StrCat("job name '", u.params().job_name(), "' is taken"));
      }
      jobs_[u.job_id()] = Job{u.job_id(), u.params(), {}};
      if (!u.params().job_name().empty()) job_by_name_[name] = u.job_id();
      next_job_id_ = std::max(next_job_id_, u.job_id() + 1);
      return absl::OkStatus();
    }
    case proto::Update::kCreateIteration: {
      const auto& u = update.create_iteration();
      auto job = jobs_.find(u.job_id());
      if (job == jobs_.end() || !ValidId(u.iteration_id()) || iterations_.contains(u.iteration_id()) ||
          u.repetition() < 0 || FindIterationForRepetition(u.job_id(), u.repetition()) != nullptr) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create iteration ", u.iteration_id()));
      }
      Iteration iteration;
      iteration.id = u.iteration_id();
      iteration.job_id = u.job_id();
      iteration.repetition = u.repetition();
      iteration.epoch_key = u.epoch_key();
      iteration.restored_from_job = u.restored_from_job();
      iteration.infinite = u.infinite();
      absl::StatusOr<IntRanges> skip = RangesFromPairs(u.skip_splits(), 1, "skip_splits");
      if (!skip.ok()) return absl::FailedPreconditionError(skip.status().message());
      iteration.skip_splits = *std::move(skip);
      absl::StatusOr<WorkerRanges> positions = WorkerRangesFromProto(u.skip_positions(), "skip_positions");
      if (!positions.ok()) return absl::FailedPreconditionError(positions.status().message());
      iteration.skip_positions = *std::move(positions);
      iterations_[u.iteration_id()] = iteration;
      job->second.iterations[u.repetition()] = u.iteration_id();
      next_iteration_id_ = std::max(next_iteration_id_, u.iteration_id() + 1);
      return absl::OkStatus();
    }
    case proto::Update::kCreateTask: {
      const auto& u = update.create_task();
      auto iteration = iterations_.find(u.iteration_id());
      if (iteration == iterations_.end() || !ValidId(u.task_id()) || tasks_.contains(u.task_id()) ||
          !workers_.contains(u.worker_address()) || u.starting_round() < 0) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create task ", u.task_id()));
      }
      tasks_[u.task_id()] = Task{u.task_id(), u.iteration_id(), u.worker_address(), false};
      tasks_[u.task_id()].starting_round = u.starting_round();
      iteration->second.tasks.push_back(u.task_id());
      ++iteration->second.unfinished_tasks;
      tasks_of_worker_[u.worker_address()].push_back(u.task_id());
      UpdateFinished(iteration->second);
      next_task_id_ = std::max(next_task_id_, u.task_id() + 1);
      return absl::OkStatus();
    }
    case proto::Update::kAcquireIterationClient: {
      const auto& u = update.acquire_iteration_client();
      auto iteration = iterations_.find(u.iteration_id());
      const int64_t num_consumers =
          iteration == iterations_.end() ? 0 : jobs_.at(iteration->second.job_id).params.num_consumers();
      if (iteration == iterations_.end() || !ValidId(u.iteration_client_id()) ||
          iteration_of_client_.contains(u.iteration_client_id()) ||
          (num_consumers > 0 && (u.consumer_index() < 0 || u.consumer_index() >= num_consumers))) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot add client ", u.iteration_client_id(), " to iteration ", u.iteration_id()));
      }
      iteration->second.clients.insert(u.iteration_client_id());
      if (iteration->second.first_client == 0) iteration->second.first_client = u.iteration_client_id();
      if (iteration->second.first_client != u.iteration_client_id()) iteration->second.several_clients = true;
      if (num_consumers > 0) {
        iteration->second.consumers_joined.insert(u.consumer_index());
      }
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
      Iteration& iteration = iterations_[client->second];
      iteration.clients.erase(u.iteration_client_id());
      iteration.awaiting_reports.erase(u.iteration_client_id());
      iteration_of_client_.erase(client);
      ReturnHeldIfAnswered(iteration);
      UpdateFinished(iteration);
      return absl::OkStatus();
    }
    case proto::Update::kFinishTask: {
      auto task = tasks_.find(update.finish_task().task_id());
      if (task == tasks_.end()) {
        return absl::FailedPreconditionError(absl::StrCat("unknown task ", update.finish_task().task_id()));
      }
      MarkFinished(task->second);
      UpdateFinished(iterations_[task->second.iteration_id]);
      return absl::OkStatus();
    }
    case proto::Update::kRemoveWorker: {
      // A removed worker's tasks are over: their clients stop waiting, and
      // their undelivered splits go to other tasks.
      const std::string& address = update.remove_worker().address();
      workers_.erase(address);
      draining_workers_.erase(address);
      auto of_worker = tasks_of_worker_.find(address);
      if (of_worker == tasks_of_worker_.end()) return absl::OkStatus();
      for (int64_t id : of_worker->second) {
        Task& task = tasks_.at(id);
        if (task.completed) {
          // A client read it to its end: over, nothing lost, even if its
          // worker's own report (FinishTask) never comes.
          if (!task.finished) {
            MarkFinished(task);
            UpdateFinished(iterations_[task.iteration_id]);
          }
          continue;
        }
        // A finished task whose leases are held is lost too: listed again if
        // its worker came back, it would serve elements of held splits
        // that no consumer reported.
        const bool held = !task.leases.empty() && HoldsLostSplits(iterations_[task.iteration_id]);
        ReturnLeases(task);
        if (!task.finished || held) {
          if (!task.finished) MarkFinished(task);
          task.lost = true;
          task.lost_reason = update.remove_worker().reason();
        }
        UpdateFinished(iterations_[task.iteration_id]);
      }
      return absl::OkStatus();
    }
    case proto::Update::kLoseTask: {
      // Its worker stays (it heartbeats, and other iterations' tasks run
      // there); only this task is over, its undelivered splits going to
      // other tasks. A task its worker finished still holds elements its
      // readers never got, so it is lost too; one read to its end is not.
      const auto& u = update.lose_task();
      auto task = tasks_.find(u.task_id());
      if (task == tasks_.end() || task->second.lost || task->second.completed) {
        return absl::FailedPreconditionError(absl::StrCat("cannot lose task ", u.task_id()));
      }
      ReturnLeases(task->second);
      MarkFinished(task->second);
      task->second.lost = true;
      task->second.lost_reason = u.reason();
      UpdateFinished(iterations_[task->second.iteration_id]);
      return absl::OkStatus();
    }
    case proto::Update::kDrainWorker: {
      // Its running tasks end when told so (GetSplits) or stop early
      // (parallel_epochs); a drained task that ends is finished, not lost.
      const std::string& address = update.drain_worker().address();
      if (!workers_.contains(address)) {
        return absl::FailedPreconditionError(absl::StrCat("cannot drain unknown worker ", address));
      }
      draining_workers_.insert(address);
      if (auto of_worker = tasks_of_worker_.find(address); of_worker != tasks_of_worker_.end()) {
        for (int64_t id : of_worker->second) {
          Task& task = tasks_.at(id);
          if (!task.finished) task.drained = true;
        }
      }
      return absl::OkStatus();
    }
    case proto::Update::kLeaseSplits: {
      const auto& u = update.lease_splits();
      auto task = tasks_.find(u.task_id());
      if (task == tasks_.end() || task->second.finished) {
        return absl::FailedPreconditionError(absl::StrCat("cannot lease splits to task ", u.task_id()));
      }
      Iteration& iteration = iterations_[task->second.iteration_id];
      // New runs continue the iteration's numbering; any other must lie
      // within one returned run.
      int64_t next_new = iteration.next_split_seq;
      SplitRuns returned_left = iteration.returned_splits;
      for (const proto::SplitLease& lease : u.splits()) {
        if (!ValidLease(lease)) {
          return absl::FailedPreconditionError(
              absl::StrCat("a lease of iteration ", iteration.id, " has seq ", lease.seq(), ", count ",
                           lease.count(), ", positions ", lease.begin(), " to ", lease.end()));
        }
        const Split run = SplitFromMessage(lease);
        const bool continues = run.seq == next_new ||
                               (run.seq > next_new && CoversRange(iteration.skip_splits, next_new, run.seq));
        if (continues && !OverlapsRange(iteration.skip_splits, run.seq, run.seq + run.count)) {
          next_new = run.seq + run.count;
        } else if (!RemoveSplits(&returned_left, run.seq, run.count)) {
          return absl::FailedPreconditionError(
              run.count == 1 ? absl::StrCat("split ", run.seq, " of iteration ", iteration.id,
                                            " is neither new nor returned")
                             : absl::StrCat("splits ", run.seq, " to ", run.seq + run.count - 1,
                                            " of iteration ", iteration.id, " are neither new nor returned"));
        }
      }
      if (u.next_split_seq() != 0) {
        if (u.next_split_seq() < next_new ||
            (u.next_split_seq() > next_new &&
             !CoversRange(iteration.skip_splits, next_new, u.next_split_seq()))) {
          return absl::FailedPreconditionError(absl::StrCat("a lease of iteration ", iteration.id,
                                                            " moves the next split to ", u.next_split_seq(),
                                                            " from ", next_new, " past splits not skipped"));
        }
        next_new = u.next_split_seq();
      }
      iteration.returned_splits = std::move(returned_left);
      iteration.next_split_seq = next_new;
      task->second.last_split_response.clear();
      for (const proto::SplitLease& lease : u.splits()) {
        const Split run = SplitFromMessage(lease);
        // An endless dataset's splits are not leased: a lost task's splits
        // would only come again among endless others, and its leases would
        // grow for as long as it is read (3-4 MB/s).
        if (!iteration.infinite) AddLease(iteration, task->second, run);
        task->second.last_split_response.push_back(run);
      }
      task->second.last_split_request = u.request_id();
      task->second.last_end_of_splits = u.end_of_splits();
      iteration.split_cursor = u.cursor();
      if (u.provider_exhausted()) iteration.splits_exhausted = true;
      return absl::OkStatus();
    }
    case proto::Update::kCompleteSplits: {
      const auto& u = update.complete_splits();
      auto iteration = iterations_.find(u.iteration_id());
      if (iteration == iterations_.end()) {
        return absl::FailedPreconditionError(absl::StrCat("unknown iteration ", u.iteration_id()));
      }
      for (int64_t seq : u.seqs()) {
        RemoveSplits(&iteration->second.returned_splits, seq, 1);
        RemoveSplits(&iteration->second.held_splits, seq, 1);
        // A GetSplits retry never follows: its worker had the answer.
        iteration->second.taken_positions.erase(seq);
        DeliverSplit(iteration->second, seq);
      }
      UpdateFinished(iteration->second);
      return absl::OkStatus();
    }
    case proto::Update::kReportTakenPositions:
      return ApplyTakenPositions(update.report_taken_positions());
    case proto::Update::kExtendRoundHorizon: {
      auto iteration = iterations_.find(update.extend_round_horizon().iteration_id());
      if (iteration == iterations_.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("unknown iteration ", update.extend_round_horizon().iteration_id()));
      }
      iteration->second.round_horizon =
          std::max(iteration->second.round_horizon, update.extend_round_horizon().horizon());
      return absl::OkStatus();
    }
    case proto::Update::kCompleteTask: {
      auto task = tasks_.find(update.complete_task().task_id());
      if (task == tasks_.end()) {
        return absl::FailedPreconditionError(absl::StrCat("unknown task ", update.complete_task().task_id()));
      }
      task->second.completed = true;
      ForgetTakenPositions(iterations_[task->second.iteration_id], task->second.leases);
      ClearLeases(task->second);
      return absl::OkStatus();
    }
    case proto::Update::kRemoveJob: {
      auto job = jobs_.find(update.remove_job().job_id());
      if (job == jobs_.end()) {
        return absl::FailedPreconditionError(absl::StrCat("unknown job ", update.remove_job().job_id()));
      }
      for (const auto& [repetition, iteration_id] : job->second.iterations) {
        const Iteration& iteration = iterations_.at(iteration_id);
        // An iteration whose tasks all ended may still wait for splits its
        // lost tasks left (HasUnreadSplits); a journal from before that
        // rule removed such jobs, and its records still apply.
        const bool tasks_ended = std::all_of(iteration.tasks.begin(), iteration.tasks.end(),
                                             [this](int64_t id) { return tasks_.at(id).finished; });
        if (!(iteration.finished || tasks_ended) || !iteration.clients.empty()) {
          return absl::FailedPreconditionError(
              absl::StrCat("job ", job->first, " still has iteration ", iteration_id, " running or read"));
        }
      }
      for (const auto& [repetition, iteration_id] : job->second.iterations) {
        for (int64_t task : iterations_.at(iteration_id).tasks) {
          auto of_worker = tasks_of_worker_.find(tasks_.at(task).worker_address);
          std::erase(of_worker->second, task);
          if (of_worker->second.empty()) tasks_of_worker_.erase(of_worker);
          tasks_.erase(task);
        }
        iterations_.erase(iteration_id);
      }
      auto named =
          job_by_name_.find(std::make_pair(job->second.params.tenant(), job->second.params.job_name()));
      if (named != job_by_name_.end() && named->second == job->first) job_by_name_.erase(named);
      jobs_.erase(job);
      return absl::OkStatus();
    }
    case proto::Update::kRemoveDataset: {
      const std::string& id = update.remove_dataset().dataset_id();
      auto dataset = datasets_.find(id);
      if (dataset == datasets_.end() || std::any_of(jobs_.begin(), jobs_.end(), [&](const auto& job) {
            return job.second.params.dataset_id() == id;
          })) {
        return absl::FailedPreconditionError(absl::StrCat("cannot remove dataset ", id));
      }
      auto by_fingerprint =
          dataset_by_fingerprint_.find(std::make_pair(dataset->second.tenant, dataset->second.fingerprint));
      if (by_fingerprint != dataset_by_fingerprint_.end() && by_fingerprint->second == id) {
        dataset_by_fingerprint_.erase(by_fingerprint);
      }
      datasets_.erase(dataset);
      return absl::OkStatus();
    }
    case proto::Update::kFailIteration: {
      const auto& u = update.fail_iteration();
      auto iteration = iterations_.find(u.iteration_id());
      if (iteration == iterations_.end() || u.code() <= 0 ||
          u.code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
        return absl::FailedPreconditionError(absl::StrCat("cannot fail iteration ", u.iteration_id()));
      }
      // The first cause stands: later failures are its consequences.
      if (iteration->second.error_code == 0) {
        iteration->second.error_code = u.code();
        iteration->second.error_message = u.message();
      }
      DropSplits(iteration->second);
      UpdateFinished(iteration->second);
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
      DropSplits(iteration->second);
      return absl::OkStatus();
    }
    case proto::Update::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("empty update");
}

void DispatcherState::UpdateFinished(Iteration& iteration) {
  bool all_tasks_finished = !iteration.tasks.empty() && iteration.unfinished_tasks == 0;
  // Static sharding: every listed worker's shard must be read whole, by a
  // task that was not lost (a worker back at that address runs it again).
  const proto::JobParams& params = jobs_.at(iteration.job_id).params;
  if (IsStaticSharding(params)) {
    for (const std::string& address : params.static_workers()) {
      all_tasks_finished &= std::any_of(iteration.tasks.begin(), iteration.tasks.end(), [&](int64_t id) {
        const Task& task = tasks_.at(id);
        return task.worker_address == address && task.finished && !task.lost;
      });
    }
  }
  // Returned splits still have to be read, by a task yet to be made; so do
  // the splits not yet handed out when the last tasks were lost.
  iteration.finished =
      iteration.collected || iteration.error_code != 0 || (all_tasks_finished && !HasUnreadSplits(iteration));
}

bool DispatcherState::HasUnreadSplits(const Iteration& iteration) const {
  if (!iteration.returned_splits.empty() || !iteration.held_splits.empty()) return true;
  const proto::JobParams& params = jobs_.at(iteration.job_id).params;
  if (params.processing_mode() != proto::DISTRIBUTED_EPOCH || IsStaticSharding(params) ||
      iteration.splits_exhausted || iteration.collected || iteration.error_code != 0) {
    return false;
  }
  // A split provider that has not run out (an endless one never does) still
  // has splits, unless a task's worker side ended on its own (a take before
  // distribute): only lost or drained tasks ended, so the next task reads on.
  bool any_cut_off = false;
  for (int64_t id : iteration.tasks) {
    const Task& task = tasks_.at(id);
    if (task.finished && !task.lost && !task.drained) return false;
    any_cut_off |= task.lost || task.drained;
  }
  return any_cut_off;
}

void DispatcherState::AddLease(Iteration& iteration, Task& task, const Split& run) {
  task.leases[run.seq] = run;
  iteration.lease_holders[run.seq] = task.id;
}

bool DispatcherState::IsSplitOutstanding(const Iteration& iteration, int64_t seq) const {
  if (HoldsSplit(iteration.returned_splits, seq) || HoldsSplit(iteration.held_splits, seq)) return true;
  auto holder = iteration.lease_holders.upper_bound(seq);
  if (holder == iteration.lease_holders.begin()) return false;
  --holder;
  const auto task = tasks_.find(holder->second);
  return task != tasks_.end() && HoldsSplit(task->second.leases, seq);
}

void DispatcherState::DeliverSplit(Iteration& iteration, int64_t seq) {
  auto holder = iteration.lease_holders.upper_bound(seq);
  if (holder == iteration.lease_holders.begin()) return;
  --holder;
  const int64_t first = holder->first;
  Task& task = tasks_.at(holder->second);
  if (!RemoveSplits(&task.leases, seq, 1)) return;  // not leased (delivered before)
  // The run is cut around seq, as RemoveSplits cut it in the task.
  iteration.lease_holders.erase(holder);
  if (task.leases.contains(first)) iteration.lease_holders[first] = task.id;
  if (task.leases.contains(seq + 1)) iteration.lease_holders[seq + 1] = task.id;
}

void DispatcherState::ClearLeases(Task& task) {
  if (auto iteration = iterations_.find(task.iteration_id); iteration != iterations_.end()) {
    for (const auto& [seq, split] : task.leases) iteration->second.lease_holders.erase(seq);
  }
  task.leases.clear();
}

void DispatcherState::MarkFinished(Task& task) {
  if (task.finished) return;
  task.finished = true;
  --iterations_.at(task.iteration_id).unfinished_tasks;
}

void DispatcherState::RebuildIndexes() {
  tasks_of_worker_.clear();
  for (auto& [id, iteration] : iterations_) {
    iteration.lease_holders.clear();
    iteration.unfinished_tasks = 0;
  }
  for (const auto& [id, task] : tasks_) {
    tasks_of_worker_[task.worker_address].push_back(id);
    Iteration& iteration = iterations_.at(task.iteration_id);
    if (!task.finished) ++iteration.unfinished_tasks;
    for (const auto& [seq, split] : task.leases) iteration.lease_holders[seq] = id;
  }
}

const DispatcherState::Dataset* DispatcherState::FindDataset(const std::string& id) const {
  auto it = datasets_.find(id);
  return it == datasets_.end() ? nullptr : &it->second;
}

const DispatcherState::Dataset* DispatcherState::FindDatasetByFingerprint(const std::string& fingerprint,
                                                                          const std::string& tenant) const {
  auto it = dataset_by_fingerprint_.find(std::make_pair(tenant, fingerprint));
  return it == dataset_by_fingerprint_.end() ? nullptr : FindDataset(it->second);
}

std::string DispatcherState::NextDatasetId() const {
  int64_t next = next_dataset_id_;
  while (next < INT64_MAX && datasets_.contains(std::to_string(next))) ++next;
  return std::to_string(next);
}

const DispatcherState::Job* DispatcherState::FindJob(int64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const DispatcherState::Job* DispatcherState::FindJobByName(const std::string& name,
                                                           const std::string& tenant) const {
  auto it = job_by_name_.find(std::make_pair(tenant, name));
  return it == job_by_name_.end() ? nullptr : FindJob(it->second);
}

const DispatcherState::Iteration* DispatcherState::FindIteration(int64_t id) const {
  auto it = iterations_.find(id);
  return it == iterations_.end() ? nullptr : &it->second;
}

const DispatcherState::Iteration* DispatcherState::FindIterationForRepetition(int64_t job_id,
                                                                              int64_t repetition) const {
  const Job* job = FindJob(job_id);
  if (job == nullptr) return nullptr;
  auto it = job->iterations.find(repetition);
  return it == job->iterations.end() ? nullptr : FindIteration(it->second);
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
  auto of_worker = tasks_of_worker_.find(address);
  if (of_worker == tasks_of_worker_.end()) return result;
  for (int64_t id : of_worker->second) result.push_back(&tasks_.at(id));
  return result;
}

}  // namespace sluice::dispatcher
