#include "dispatcher/dispatcher_impl.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/proto_convert.h"
#include "pipeline/builder.h"
#include "pipeline/sharding.h"
#include "pipeline/split_provider.h"

namespace sluice::dispatcher {
namespace {

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* ModeName(proto::ProcessingMode mode) {
  return mode == proto::DISTRIBUTED_EPOCH ? "distributed_epoch" : "parallel_epochs";
}

bool SameParams(const proto::JobParams& a, const proto::JobParams& b) {
  return a.dataset_id() == b.dataset_id() && a.processing_mode() == b.processing_mode() &&
         a.sharding_policy() == b.sharding_policy() && a.exactly_once() == b.exactly_once() &&
         a.num_consumers() == b.num_consumers();
}

// exactly_once needs a worker side whose output positions within a split
// are the same on every run: an element source, then element-wise steps.
absl::Status CheckExactlyOnce(const proto::JobParams& params, const proto::DatasetDef& def) {
  if (params.processing_mode() != proto::DISTRIBUTED_EPOCH) {
    return absl::FailedPreconditionError(absl::StrCat("exactly_once needs distributed_epoch; the job is ",
                                                      ModeName(params.processing_mode())));
  }
  auto refuse = [](int index, const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("exactly_once needs a worker side that is element-wise (range or from_tensor_slices, "
                     "then map, filter or prefetch; batch after distribute): step ",
                     index + 1, " ", why));
  };
  if (def.steps_size() == 0 || !(def.steps(0).has_range() || def.steps(0).has_from_tensor_slices())) {
    return refuse(0, "is not range or from_tensor_slices");
  }
  for (int i = 1; i < def.steps_size(); ++i) {
    const proto::Step& step = def.steps(i);
    if (step.has_map() && step.map().num_parallel_calls() > 1 && !step.map().deterministic()) {
      return refuse(i, "is a map with deterministic: false, whose order changes from run to run");
    }
    if (!step.has_map() && !step.has_filter() && !step.has_prefetch()) {
      return refuse(i, "is " + StepName(step));
    }
  }
  return absl::OkStatus();
}

// Whether a worker may run a task of the job: any worker, or for static
// sharding a listed one.
bool RunsOn(const proto::JobParams& params, const std::string& address) {
  return !IsStaticSharding(params) ||
         std::find(params.static_workers().begin(), params.static_workers().end(), address) !=
             params.static_workers().end();
}

}  // namespace

DispatcherImpl::DispatcherImpl(DispatcherConfig config, TaskPushFn push_task)
    : config_(std::move(config)), push_task_(std::move(push_task)) {}

DispatcherImpl::~DispatcherImpl() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (monitor_.joinable()) monitor_.join();
}

absl::Status DispatcherImpl::Start() {
  if (!config_.work_dir.empty()) {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = Recover(); !s.ok()) return s;
  }
  monitor_ = std::thread([this] { RemoveLostWorkers(); });
  return absl::OkStatus();
}

absl::Status DispatcherImpl::Recover() {
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(config_.work_dir, &recovered);
  if (!journal.ok()) return journal.status();
  for (const std::string& warning : recovered.warnings) spdlog::warn("journal: {}", warning);
  if (recovered.snapshot.has_value()) {
    absl::StatusOr<DispatcherState> state = DispatcherState::FromSnapshot(*recovered.snapshot);
    if (!state.ok()) {
      return absl::DataLossError(absl::StrCat(config_.work_dir, ": snapshot: ", state.status().message()));
    }
    state_ = *std::move(state);
  }
  for (const Journal::Recovered::Record& record : recovered.updates) {
    if (absl::Status s = state_.Apply(record.update); !s.ok()) {
      return absl::DataLossError(
          absl::StrCat(record.file, ": byte ", record.offset, ": update does not apply: ", s.message()));
    }
  }
  // What is not journaled starts afresh: every known worker and client
  // gets a full timeout to be heard from again.
  const auto now = Clock::now();
  for (const auto& [address, worker] : state_.workers()) worker_heartbeats_[address] = now;
  for (const auto& [id, iteration] : state_.iterations()) {
    for (int64_t client : iteration.clients) client_heartbeats_[client] = now;
    const auto* job = state_.FindJob(iteration.job_id);
    if (iteration.collected || job->params.processing_mode() != proto::DISTRIBUTED_EPOCH) continue;
    absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
        NewSplitProvider(state_.FindDataset(job->params.dataset_id())->def);
    if (!provider.ok()) return provider.status();
    if (!iteration.split_cursor.empty()) {
      if (absl::Status s = (*provider)->Restore(iteration.split_cursor); !s.ok()) {
        return absl::DataLossError(absl::StrCat("iteration ", id, ": split cursor '", iteration.split_cursor,
                                                "' does not restore: ", s.message()));
      }
    }
    split_providers_[id] = *std::move(provider);
  }
  journal_ = *std::move(journal);
  const int64_t replayed = journal_->records_since_snapshot();
  // Each start begins from one snapshot, so replays stay short.
  if (absl::Status s = journal_->WriteSnapshot(state_.ToSnapshot()); !s.ok()) return s;
  spdlog::info("recovered from {}: {} records replayed{}; {} datasets, {} jobs, {} iterations, {} workers",
               config_.work_dir, replayed, recovered.snapshot.has_value() ? " after a snapshot" : "",
               state_.datasets().size(), state_.jobs().size(), state_.iterations().size(),
               state_.workers().size());
  return absl::OkStatus();
}

absl::Status DispatcherImpl::Apply(const proto::Update& update) {
  // The change becomes visible when mu_ is released, after the journal
  // has it on disk.
  if (absl::Status s = state_.Apply(update); !s.ok()) return s;
  if (!journal_.has_value()) return absl::OkStatus();
  absl::Status status = journal_->Append(update);
  if (status.ok() && journal_->records_since_snapshot() >= config_.snapshot_interval) {
    status = journal_->WriteSnapshot(state_.ToSnapshot());
  }
  if (!status.ok()) {
    // The state in memory is ahead of the disk and cannot be taken back:
    // going on would lose it at the next restart, so stop, and let the
    // restart recover what is journaled.
    spdlog::critical("cannot write the journal in {}: {}; exiting", config_.work_dir,
                     std::string(status.message()));
    std::_Exit(kJournalFailureExitCode);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SplitProvider>> DispatcherImpl::NewSplitProvider(
    const proto::DatasetDef& def) const {
  SplitOptions options;
  options.elements_per_split = config_.elements_per_split;
  return MakeSplitProvider(def, options);
}

void DispatcherImpl::PushTasks(const std::vector<std::pair<std::string, proto::TaskDef>>& new_tasks) const {
  if (!push_task_) return;
  for (const auto& [address, def] : new_tasks) push_task_(address, def);
}

void DispatcherImpl::RemoveWorker(const std::string& address,
                                  std::vector<std::pair<std::string, proto::TaskDef>>* new_tasks) {
  worker_heartbeats_.erase(address);
  proto::Update update;
  update.mutable_remove_worker()->set_address(address);
  if (!Apply(update).ok()) return;
  AssignReturnedSplits(new_tasks);
}

void DispatcherImpl::AssignReturnedSplits(std::vector<std::pair<std::string, proto::TaskDef>>* new_tasks) {
  std::vector<int64_t> orphaned;
  for (const auto& [id, iteration] : state_.iterations()) {
    if (iteration.collected || iteration.returned_splits.empty()) continue;
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

absl::StatusOr<DatasetPtr> DispatcherImpl::Built(const std::string& dataset_id) {
  auto cached = built_datasets_.find(dataset_id);
  if (cached != built_datasets_.end()) return cached->second;
  const DispatcherState::Dataset* dataset = state_.FindDataset(dataset_id);
  if (dataset == nullptr) return absl::NotFoundError(absl::StrCat("unknown dataset id '", dataset_id, "'"));
  absl::StatusOr<DatasetPtr> built = BuildDataset(dataset->def);
  if (built.ok()) built_datasets_[dataset_id] = *built;
  return built;
}

absl::Status DispatcherImpl::GetVersion(const proto::GetVersionRequest&,
                                        proto::GetVersionResponse* response) {
  response->set_protocol_version(kProtocolVersion);
  response->set_server_version(kServerVersion);
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetOrRegisterDataset(const proto::GetOrRegisterDatasetRequest& request,
                                                  proto::GetOrRegisterDatasetResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  const std::string fingerprint = DatasetFingerprint(request.dataset());
  absl::MutexLock lock(&mu_);
  if (!request.dataset_id().empty()) {
    if (const auto* existing = state_.FindDataset(request.dataset_id()); existing != nullptr) {
      if (existing->fingerprint != fingerprint) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dataset id '", request.dataset_id(), "' is already registered with a different definition"));
      }
      response->set_dataset_id(existing->id);
      return absl::OkStatus();
    }
  } else if (const auto* existing = state_.FindDatasetByFingerprint(fingerprint); existing != nullptr) {
    response->set_dataset_id(existing->id);
    return absl::OkStatus();
  }
  // Built before registering, so a definition that cannot run is refused
  // with its reason rather than failing later on every worker.
  absl::StatusOr<DatasetPtr> built = BuildDataset(request.dataset());
  if (!built.ok()) return built.status();
  proto::Update update;
  auto* u = update.mutable_register_dataset();
  u->set_dataset_id(request.dataset_id().empty() ? state_.NextDatasetId() : request.dataset_id());
  u->set_fingerprint(fingerprint);
  *u->mutable_dataset() = request.dataset();
  if (absl::Status s = Apply(update); !s.ok()) return s;
  built_datasets_[u->dataset_id()] = *built;
  spdlog::info("registered dataset {} (fingerprint {})", u->dataset_id(), fingerprint);
  response->set_dataset_id(u->dataset_id());
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetDatasetInfo(const proto::GetDatasetInfoRequest& request,
                                            proto::GetDatasetInfoResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<DatasetPtr> built = Built(request.dataset_id());
  if (!built.ok()) return built.status();
  ElementSpecToProto((*built)->element_spec(), response->mutable_element_spec());
  response->set_cardinality((*built)->Cardinality());
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetOrCreateJob(const proto::GetOrCreateJobRequest& request,
                                            proto::GetOrCreateJobResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  const proto::JobParams& params = request.params();
  if (params.processing_mode() == proto::PROCESSING_MODE_UNSET) {
    return absl::InvalidArgumentError("job: processing_mode is not set");
  }
  proto::JobParams job_params = params;
  if (job_params.sharding_policy() == proto::SHARDING_POLICY_UNSET) {
    job_params.set_sharding_policy(
        params.processing_mode() == proto::DISTRIBUTED_EPOCH ? proto::SHARDING_DYNAMIC : proto::SHARDING_OFF);
  }
  if ((job_params.sharding_policy() == proto::SHARDING_DYNAMIC) !=
      (params.processing_mode() == proto::DISTRIBUTED_EPOCH)) {
    return absl::InvalidArgumentError(absl::StrCat("job: sharding policy ",
                                                   ShardingPolicyName(job_params.sharding_policy()),
                                                   " does not go with ", ModeName(params.processing_mode())));
  }
  absl::MutexLock lock(&mu_);
  const auto* dataset = state_.FindDataset(params.dataset_id());
  if (dataset == nullptr)
    return absl::NotFoundError(absl::StrCat("unknown dataset id '", params.dataset_id(), "'"));
  if (!params.job_name().empty()) {
    if (const auto* job = state_.FindJobByName(params.job_name()); job != nullptr) {
      if (!SameParams(job->params, job_params)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "job '", params.job_name(), "' already exists for dataset ", job->params.dataset_id(), " in ",
            ModeName(job->params.processing_mode()), " mode; asked for dataset ", params.dataset_id(), " in ",
            ModeName(params.processing_mode()), " mode"));
      }
      response->set_job_id(job->id);
      return absl::OkStatus();
    }
  }
  if (params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
    absl::StatusOr<std::unique_ptr<SplitProvider>> splits = MakeSplitProvider(dataset->def);
    if (!splits.ok()) return splits.status();
  }
  if (job_params.exactly_once()) {
    if (absl::Status s = CheckExactlyOnce(job_params, dataset->def); !s.ok()) return s;
  }
  if (job_params.num_consumers() < 0) return absl::InvalidArgumentError("job: num_consumers must be >= 0");
  if (job_params.num_consumers() > 0) {
    if (params.processing_mode() != proto::PARALLEL_EPOCHS || IsStaticSharding(job_params)) {
      return absl::FailedPreconditionError(
          "coordinated reads (num_consumers) need parallel_epochs (sharding OFF)");
    }
    if (params.job_name().empty()) {
      return absl::InvalidArgumentError(
          "coordinated reads (num_consumers) need a job_name that the consumers share");
    }
    absl::StatusOr<DatasetPtr> built = Built(params.dataset_id());
    if (!built.ok()) return built.status();
    if ((*built)->Cardinality() != kInfiniteCardinality) {
      return absl::FailedPreconditionError(
          absl::StrCat("coordinated reads (num_consumers) need an infinite dataset, so that every round has "
                       "an element for each consumer; dataset ",
                       params.dataset_id(), " has ",
                       (*built)->Cardinality() >= 0 ? absl::StrCat((*built)->Cardinality(), " elements")
                                                    : std::string("an unknown number of elements"),
                       " (add repeat)"));
    }
  }
  if (IsStaticSharding(job_params)) {
    const std::string policy = ShardingPolicyName(job_params.sharding_policy());
    if (config_.worker_addresses.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sharding policy ", policy,
          " needs the dispatcher's worker_addresses (the workers to shard over, in order); it has none"));
    }
    // Sharded here once for shard 0, so a pipeline that cannot be sharded
    // this way (too few files, no SHARD_HINT) is refused now.
    proto::DatasetDef sharded = dataset->def;
    if (absl::Status s = ShardForWorker(job_params.sharding_policy(),
                                        static_cast<int>(config_.worker_addresses.size()), 0, &sharded);
        !s.ok()) {
      return s;
    }
    for (const std::string& address : config_.worker_addresses) job_params.add_static_workers(address);
  }
  proto::Update update;
  update.mutable_create_job()->set_job_id(state_.NextJobId());
  *update.mutable_create_job()->mutable_params() = job_params;
  if (absl::Status s = Apply(update); !s.ok()) return s;
  response->set_job_id(update.create_job().job_id());
  return absl::OkStatus();
}

absl::Status DispatcherImpl::CreateTask(int64_t iteration_id, const std::string& worker_address,
                                        bool joins_running_iteration) {
  proto::Update update;
  auto* u = update.mutable_create_task();
  u->set_task_id(state_.NextTaskId());
  u->set_iteration_id(iteration_id);
  u->set_worker_address(worker_address);
  // Coordinated reads: consumers may already hold task lists through the
  // horizon, so a new task serves only rounds after it.
  const auto* iteration = state_.FindIteration(iteration_id);
  if (joins_running_iteration && iteration != nullptr &&
      state_.FindJob(iteration->job_id)->params.num_consumers() > 0) {
    u->set_starting_round(iteration->round_horizon + 1);
  }
  return Apply(update);
}

absl::Status DispatcherImpl::GetOrCreateIteration(const proto::GetOrCreateIterationRequest& request,
                                                  proto::GetOrCreateIterationResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  // New tasks go to their workers after the lock is released.
  std::vector<std::pair<std::string, proto::TaskDef>> new_tasks;
  {
    absl::MutexLock lock(&mu_);
    const auto* job = state_.FindJob(request.job_id());
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("unknown job ", request.job_id()));
    if (request.repetition() < 0) return absl::InvalidArgumentError("repetition must be >= 0");
    const int64_t num_consumers = job->params.num_consumers();
    if (num_consumers > 0 && (request.consumer_index() < 0 || request.consumer_index() >= num_consumers)) {
      return absl::InvalidArgumentError(absl::StrCat("consumer_index ", request.consumer_index(),
                                                     " is out of range for ", num_consumers, " consumers"));
    }
    const auto* iteration = state_.FindIterationForRepetition(job->id, request.repetition());
    if (iteration != nullptr && num_consumers > 0 &&
        iteration->consumers_joined.contains(request.consumer_index())) {
      return absl::FailedPreconditionError(
          absl::StrCat("job '", job->params.job_name(), "' is at round ", iteration_rounds_[iteration->id],
                       ": consumer ", request.consumer_index(), " has already joined; a set of ",
                       num_consumers, " coordinated consumers must start together at round 0"));
    }
    if (iteration == nullptr) {
      const auto* dataset = state_.FindDataset(job->params.dataset_id());
      if (job->params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
        absl::StatusOr<std::unique_ptr<SplitProvider>> splits = NewSplitProvider(dataset->def);
        if (!splits.ok()) return splits.status();
        split_providers_[state_.NextIterationId()] = *std::move(splits);
      }
      proto::Update update;
      auto* u = update.mutable_create_iteration();
      u->set_iteration_id(state_.NextIterationId());
      u->set_job_id(job->id);
      u->set_repetition(request.repetition());
      if (absl::Status s = Apply(update); !s.ok()) return s;
      for (const auto& [address, worker] : state_.workers()) {
        if (!RunsOn(job->params, address)) continue;
        const int64_t task_id = state_.NextTaskId();
        if (absl::Status s = CreateTask(u->iteration_id(), address, /*joins_running_iteration=*/false);
            !s.ok()) {
          return s;
        }
        FillTaskDef(*state_.FindTask(task_id), &new_tasks.emplace_back(address, proto::TaskDef()).second);
      }
      if (num_consumers > 0) {
        proto::Update horizon;
        horizon.mutable_extend_round_horizon()->set_iteration_id(u->iteration_id());
        horizon.mutable_extend_round_horizon()->set_horizon(config_.round_window);
        if (absl::Status s = Apply(horizon); !s.ok()) return s;
      }
      iteration = state_.FindIteration(u->iteration_id());
      spdlog::info("iteration {} (job {}, repetition {}) has {} tasks", iteration->id, job->id,
                   request.repetition(), iteration->tasks.size());
    }
    proto::Update acquire;
    acquire.mutable_acquire_iteration_client()->set_iteration_client_id(state_.NextIterationClientId());
    acquire.mutable_acquire_iteration_client()->set_iteration_id(iteration->id);
    acquire.mutable_acquire_iteration_client()->set_consumer_index(
        num_consumers > 0 ? request.consumer_index() : -1);
    if (absl::Status s = Apply(acquire); !s.ok()) return s;
    client_heartbeats_[acquire.acquire_iteration_client().iteration_client_id()] = Clock::now();
    response->set_iteration_id(iteration->id);
    response->set_iteration_client_id(acquire.acquire_iteration_client().iteration_client_id());
  }
  PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status DispatcherImpl::ClientHeartbeat(const proto::ClientHeartbeatRequest& request,
                                             proto::ClientHeartbeatResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  std::vector<std::pair<std::string, proto::TaskDef>> new_tasks;
  {
    absl::MutexLock lock(&mu_);
    std::optional<int64_t> iteration_id = state_.IterationOfClient(request.iteration_client_id());
    if (!iteration_id.has_value()) {
      return absl::NotFoundError(absl::StrCat("unknown iteration client ", request.iteration_client_id()));
    }
    client_heartbeats_[request.iteration_client_id()] = Clock::now();
    if (const auto* iteration = state_.FindIteration(*iteration_id);
        state_.FindJob(iteration->job_id)->params.num_consumers() > 0) {
      int64_t& furthest = iteration_rounds_[iteration->id];
      furthest = std::max(furthest, request.current_round());
      // Keeps the horizon a window ahead, extended half a window at a time.
      if (furthest + config_.round_window / 2 > iteration->round_horizon) {
        proto::Update update;
        update.mutable_extend_round_horizon()->set_iteration_id(iteration->id);
        update.mutable_extend_round_horizon()->set_horizon(furthest + config_.round_window);
        if (absl::Status s = Apply(update); !s.ok()) return s;
      }
    }
    for (int64_t task_id : request.completed_tasks()) {
      const auto* task = state_.FindTask(task_id);
      if (task == nullptr || task->completed) continue;
      proto::Update update;
      update.mutable_complete_task()->set_task_id(task_id);
      if (absl::Status s = Apply(update); !s.ok()) return s;
    }
    if (!request.completed_splits().empty()) {
      proto::Update update;
      update.mutable_complete_splits()->set_iteration_id(*iteration_id);
      *update.mutable_complete_splits()->mutable_seqs() = request.completed_splits();
      if (absl::Status s = Apply(update); !s.ok()) return s;
    }
    for (const std::string& address : request.unreachable_workers()) {
      auto heard = worker_heartbeats_.find(address);
      if (state_.FindWorker(address) == nullptr || heard == worker_heartbeats_.end() ||
          Clock::now() - heard->second < kUnreachableWorkerSilence) {
        continue;
      }
      spdlog::warn("worker {}: a client cannot reach it and it is silent; removed, its tasks end", address);
      RemoveWorker(address, &new_tasks);
    }
    const auto* iteration = state_.FindIteration(*iteration_id);
    for (int64_t task_id : iteration->tasks) {
      const auto* task = state_.FindTask(task_id);
      // Tasks of removed workers are over; the client stops reading them.
      if (task->lost || iteration->collected || state_.FindWorker(task->worker_address) == nullptr) continue;
      proto::TaskInfo* info = response->add_tasks();
      info->set_task_id(task->id);
      info->set_iteration_id(task->iteration_id);
      info->set_worker_address(task->worker_address);
      info->set_starting_round(task->starting_round);
    }
    response->set_iteration_finished(iteration->finished);
    response->set_round_horizon(iteration->round_horizon);
    if (auto rounds = iteration_rounds_.find(iteration->id); rounds != iteration_rounds_.end()) {
      response->set_furthest_round(rounds->second);
    }
  }
  PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status DispatcherImpl::ReleaseIterationClient(const proto::ReleaseIterationClientRequest& request,
                                                    proto::ReleaseIterationClientResponse*) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  client_heartbeats_.erase(request.iteration_client_id());
  // Releasing twice (a retry) is not an error for the caller.
  if (!state_.IterationOfClient(request.iteration_client_id()).has_value()) return absl::OkStatus();
  proto::Update update;
  update.mutable_release_iteration_client()->set_iteration_client_id(request.iteration_client_id());
  return Apply(update);
}

absl::Status DispatcherImpl::WorkerHeartbeat(const proto::WorkerHeartbeatRequest& request,
                                             proto::WorkerHeartbeatResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  const std::string& address = request.worker_address();
  if (address.empty()) return absl::InvalidArgumentError("worker heartbeat without an address");
  std::vector<std::pair<std::string, proto::TaskDef>> new_tasks;
  {
    absl::MutexLock lock(&mu_);
    const auto* known = state_.FindWorker(address);
    if (known != nullptr && !request.incarnation().empty() && known->incarnation != request.incarnation()) {
      // The process restarted: whatever the old one ran is gone.
      spdlog::warn("worker {} restarted; the tasks of its previous run are lost", address);
      RemoveWorker(address, &new_tasks);
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
        if (iteration.finished || !RunsOn(params, address)) continue;
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
      if (current.contains(task->id) || task->finished || state_.FindIteration(task->iteration_id)->collected)
        continue;
      FillTaskDef(*task, response->add_new_tasks());
    }
    for (int64_t id : current) {
      const auto* task = state_.FindTask(id);
      // A worker that was declared lost but lives on drops what it ran then;
      // every worker drops the tasks of collected iterations.
      if (task == nullptr || task->worker_address != address || task->lost ||
          state_.FindIteration(task->iteration_id)->collected) {
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
  absl::MutexLock lock(&mu_);
  for (int64_t task_id : request.finished_tasks()) {
    const auto* task = state_.FindTask(task_id);
    if (task == nullptr || task->finished) continue;
    proto::Update update;
    update.mutable_finish_task()->set_task_id(task_id);
    if (absl::Status s = Apply(update); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::WorkerShutdown(const proto::WorkerShutdownRequest& request,
                                            proto::WorkerShutdownResponse*) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  std::vector<std::pair<std::string, proto::TaskDef>> new_tasks;
  {
    absl::MutexLock lock(&mu_);
    if (state_.FindWorker(request.worker_address()) == nullptr) return absl::OkStatus();
    spdlog::info("worker {} shut down; its tasks end", request.worker_address());
    RemoveWorker(request.worker_address(), &new_tasks);
  }
  PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetSplits(const proto::GetSplitsRequest& request,
                                       proto::GetSplitsResponse* response) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
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
  // A lost task, or a collected iteration, reads nothing more.
  if (task->finished || iteration->collected) return answer({}, true);
  auto provider = split_providers_.find(task->iteration_id);
  if (provider == split_providers_.end()) {
    return absl::NotFoundError(absl::StrCat("iteration ", request.iteration_id(), " has no splits"));
  }
  const int max_splits =
      std::clamp<int>(request.max_splits(), 1, static_cast<int>(config_.splits_per_request));
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
    iteration_idle_since_.erase(id);
    split_providers_.erase(id);
    spdlog::info("iteration {} had no clients for {} ms: collected, its tasks dropped", id,
                 config_.job_gc_timeout_ms);
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
      std::vector<std::string> lost;
      for (const auto& [address, last] : worker_heartbeats_) {
        if (now - last > timeout) lost.push_back(address);
      }
      for (const std::string& address : lost) {
        spdlog::warn("worker {} missed heartbeats for {} ms; removed, its tasks end", address,
                     config_.worker_timeout_ms);
        RemoveWorker(address, &new_tasks);
      }
      std::vector<int64_t> silent;
      for (const auto& [client, last] : client_heartbeats_) {
        if (now - last > client_timeout) silent.push_back(client);
      }
      for (int64_t client : silent) {
        client_heartbeats_.erase(client);
        if (!state_.IterationOfClient(client).has_value()) continue;
        proto::Update update;
        update.mutable_release_iteration_client()->set_iteration_client_id(client);
        (void)Apply(update);
      }
    }
    PushTasks(new_tasks);
  }
}

}  // namespace sluice::dispatcher
