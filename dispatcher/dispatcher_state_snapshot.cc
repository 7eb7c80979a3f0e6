// DispatcherState's snapshots: the whole state as one StateSnapshot, which
// the journal writes at each start and every snapshot_interval updates, and back.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dispatcher/dispatcher_state.h"
#include "pipeline/split_provider.h"

namespace sluice::dispatcher {

namespace {

void LeasesToProto(const std::vector<Split>& splits,
                   google::protobuf::RepeatedPtrField<proto::SplitLease>* out) {
  for (const Split& split : splits) SplitToMessage(split, out->Add());
}

std::vector<Split> LeasesFromProto(const google::protobuf::RepeatedPtrField<proto::SplitLease>& leases) {
  std::vector<Split> splits;
  for (const auto& lease : leases) splits.push_back(SplitFromMessage(lease));
  return splits;
}

std::vector<Split> Values(const SplitRuns& runs) {
  std::vector<Split> values;
  for (const auto& [seq, run] : runs) values.push_back(run);
  return values;
}

}  // namespace

proto::StateSnapshot DispatcherState::ToSnapshot() const {
  proto::StateSnapshot snapshot;
  FillSnapshot(&snapshot);
  return snapshot;
}

void DispatcherState::FillSnapshot(proto::StateSnapshot* out) const {
  proto::StateSnapshot& snapshot = *out;
  for (const auto& [id, dataset] : datasets_) {
    auto* d = snapshot.add_datasets();
    d->set_dataset_id(id);
    d->set_fingerprint(dataset.fingerprint);
    *d->mutable_dataset() = dataset.def;
    d->set_tenant(dataset.tenant);
  }
  for (const auto& [address, worker] : workers_) {
    auto* w = snapshot.add_workers();
    w->set_address(address);
    for (const std::string& tag : worker.tags) w->add_tags(tag);
    w->set_incarnation(worker.incarnation);
  }
  for (const auto& [id, job] : jobs_) {
    auto* j = snapshot.add_jobs();
    j->set_job_id(id);
    *j->mutable_params() = job.params;
  }
  for (const auto& [id, iteration] : iterations_) {
    auto* i = snapshot.add_iterations();
    i->set_iteration_id(id);
    i->set_job_id(iteration.job_id);
    i->set_repetition(iteration.repetition);
    i->set_epoch_key(iteration.epoch_key);
    i->set_restored_from_job(iteration.restored_from_job);
    for (int64_t task : iteration.tasks) i->add_tasks(task);
    for (int64_t client : iteration.clients) i->add_clients(client);
    i->set_first_client(iteration.first_client);
    i->set_several_clients(iteration.several_clients);
    i->set_collected(iteration.collected);
    i->set_split_cursor(iteration.split_cursor);
    i->set_next_split_seq(iteration.next_split_seq);
    LeasesToProto(Values(iteration.returned_splits), i->mutable_returned_splits());
    i->set_splits_exhausted(iteration.splits_exhausted);
    i->set_round_horizon(iteration.round_horizon);
    for (int64_t consumer : iteration.consumers_joined) i->add_consumers_joined(consumer);
    i->set_error_code(iteration.error_code);
    i->set_error_message(iteration.error_message);
    i->set_infinite(iteration.infinite);
    AppendPairs(iteration.skip_splits, i->mutable_skip_splits());
    AppendWorkerRanges(iteration.skip_positions, i->mutable_skip_positions());
    LeasesToProto(Values(iteration.held_splits), i->mutable_held_splits());
    i->set_hold(iteration.hold);
    for (int64_t client : iteration.awaiting_reports) i->add_awaiting_reports(client);
    for (const auto& [seq, positions] : iteration.taken_positions) {
      proto::SplitDelivery* taken = i->add_taken_positions();
      taken->set_seq(seq);
      AppendPairs(positions, taken->mutable_delivered());
    }
  }
  for (const auto& [id, task] : tasks_) {
    auto* t = snapshot.add_tasks();
    t->set_task_id(id);
    t->set_iteration_id(task.iteration_id);
    t->set_worker_address(task.worker_address);
    t->set_finished(task.finished);
    t->set_lost(task.lost);
    t->set_completed(task.completed);
    t->set_last_split_request(task.last_split_request);
    LeasesToProto(task.last_split_response, t->mutable_last_split_response());
    t->set_last_end_of_splits(task.last_end_of_splits);
    LeasesToProto(Values(task.leases), t->mutable_leases());
    t->set_starting_round(task.starting_round);
    t->set_lost_reason(task.lost_reason);
    t->set_drained(task.drained);
  }
  for (const std::string& address : draining_workers_) snapshot.add_draining_workers(address);
  snapshot.set_next_dataset_id(next_dataset_id_);
  snapshot.set_next_job_id(next_job_id_);
  snapshot.set_next_iteration_id(next_iteration_id_);
  snapshot.set_next_task_id(next_task_id_);
  snapshot.set_next_iteration_client_id(next_iteration_client_id_);
}

absl::StatusOr<DispatcherState> DispatcherState::FromSnapshot(const proto::StateSnapshot& snapshot) {
  DispatcherState state;
  // Datasets, workers and jobs go through Apply, which checks them.
  for (const auto& dataset : snapshot.datasets()) {
    proto::Update update;
    *update.mutable_register_dataset() = dataset;
    if (absl::Status s = state.Apply(update); !s.ok()) return s;
  }
  for (const auto& worker : snapshot.workers()) {
    proto::Update update;
    *update.mutable_register_worker() = worker;
    if (absl::Status s = state.Apply(update); !s.ok()) return s;
  }
  for (const auto& job : snapshot.jobs()) {
    proto::Update update;
    *update.mutable_create_job() = job;
    if (absl::Status s = state.Apply(update); !s.ok()) return s;
  }
  for (const auto& t : snapshot.tasks()) {
    Task task{t.task_id(), t.iteration_id(), t.worker_address(), t.finished(), t.lost()};
    task.completed = t.completed();
    task.last_split_request = t.last_split_request();
    task.last_split_response = LeasesFromProto(t.last_split_response());
    task.last_end_of_splits = t.last_end_of_splits();
    for (const Split& split : LeasesFromProto(t.leases())) task.leases[split.seq] = split;
    task.starting_round = t.starting_round();
    task.lost_reason = t.lost_reason();
    task.drained = t.drained();
    state.tasks_[t.task_id()] = std::move(task);
  }
  for (const auto& i : snapshot.iterations()) {
    auto job = state.jobs_.find(i.job_id());
    if (job == state.jobs_.end() || i.repetition() < 0) {
      return absl::DataLossError(
          absl::StrCat("snapshot: iteration ", i.iteration_id(), " has no job ", i.job_id()));
    }
    Iteration iteration;
    iteration.id = i.iteration_id();
    iteration.job_id = i.job_id();
    iteration.repetition = i.repetition();
    iteration.epoch_key = i.epoch_key();
    iteration.restored_from_job = i.restored_from_job();
    for (int64_t task : i.tasks()) {
      if (!state.tasks_.contains(task)) {
        return absl::DataLossError(absl::StrCat("snapshot: iteration ", iteration.id, " has no task ", task));
      }
      iteration.tasks.push_back(task);
    }
    for (int64_t client : i.clients()) {
      iteration.clients.insert(client);
      state.iteration_of_client_[client] = iteration.id;
    }
    iteration.first_client = i.first_client();
    iteration.several_clients = i.several_clients() || iteration.clients.size() > 1;
    if (iteration.first_client == 0 && !iteration.clients.empty()) {
      iteration.first_client = *iteration.clients.begin();
    }
    iteration.collected = i.collected();
    iteration.split_cursor = i.split_cursor();
    iteration.next_split_seq = i.next_split_seq();
    for (const Split& split : LeasesFromProto(i.returned_splits())) {
      iteration.returned_splits[split.seq] = split;
    }
    iteration.splits_exhausted = i.splits_exhausted();
    iteration.round_horizon = i.round_horizon();
    iteration.consumers_joined.insert(i.consumers_joined().begin(), i.consumers_joined().end());
    iteration.error_code = i.error_code();
    iteration.error_message = i.error_message();
    iteration.infinite = i.infinite();
    absl::StatusOr<IntRanges> skip = RangesFromPairs(i.skip_splits(), 1, "skip_splits");
    if (!skip.ok())
      return absl::DataLossError(absl::StrCat("iteration ", iteration.id, ": ", skip.status().message()));
    iteration.skip_splits = *std::move(skip);
    absl::StatusOr<WorkerRanges> positions = WorkerRangesFromProto(i.skip_positions(), "skip_positions");
    if (!positions.ok())
      return absl::DataLossError(
          absl::StrCat("iteration ", iteration.id, ": ", positions.status().message()));
    iteration.skip_positions = *std::move(positions);
    for (const Split& split : LeasesFromProto(i.held_splits())) iteration.held_splits[split.seq] = split;
    iteration.hold = i.hold();
    for (int64_t client : i.awaiting_reports()) {
      if (!iteration.clients.contains(client)) {
        return absl::DataLossError(absl::StrCat("snapshot: iteration ", iteration.id,
                                                " awaits a report from client ", client, ", not its own"));
      }
      iteration.awaiting_reports.insert(client);
    }
    for (const proto::SplitDelivery& taken : i.taken_positions()) {
      absl::StatusOr<IntRanges> ranges = RangesFromPairs(taken.delivered(), 0, "taken_positions");
      if (!ranges.ok())
        return absl::DataLossError(absl::StrCat("iteration ", iteration.id, ": ", ranges.status().message()));
      iteration.taken_positions[taken.seq()] = *std::move(ranges);
    }
    job->second.iterations[iteration.repetition] = iteration.id;
    state.iterations_[iteration.id] = std::move(iteration);
  }
  for (const auto& [id, task] : state.tasks_) {
    if (!state.iterations_.contains(task.iteration_id)) {
      return absl::DataLossError(
          absl::StrCat("snapshot: task ", id, " has no iteration ", task.iteration_id));
    }
  }
  for (const std::string& address : snapshot.draining_workers()) {
    if (!state.workers_.contains(address)) {
      return absl::DataLossError(absl::StrCat("snapshot: draining worker ", address, " is not registered"));
    }
    state.draining_workers_.insert(address);
  }
  state.RebuildIndexes();
  for (auto& [id, iteration] : state.iterations_) state.UpdateFinished(iteration);
  state.next_dataset_id_ = std::max(state.next_dataset_id_, snapshot.next_dataset_id());
  state.next_job_id_ = std::max(state.next_job_id_, snapshot.next_job_id());
  state.next_iteration_id_ = std::max(state.next_iteration_id_, snapshot.next_iteration_id());
  state.next_task_id_ = std::max(state.next_task_id_, snapshot.next_task_id());
  state.next_iteration_client_id_ =
      std::max(state.next_iteration_client_id_, snapshot.next_iteration_client_id());
  return state;
}

}  // namespace sluice::dispatcher
