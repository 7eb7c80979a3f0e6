// DispatcherImpl's core and its side facing clients: start and recovery
// from the journal, Apply, and the requests of clients: datasets, jobs and
// iterations (client heartbeats and releases are in dispatcher_clients.cc).
#include "dispatcher/dispatcher_impl.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_convert.h"
#include "dispatcher/request_checks.h"
#include "dispatcher/tenant_quotas.h"
#include "pipeline/builder.h"
#include "pipeline/sharding.h"
#include "pipeline/split_provider.h"
#include "service/grpc_util.h"
#include "service/job_params.h"

namespace sluice::dispatcher {
namespace {

absl::Status UnknownDataset(const std::string& dataset_id) {
  return absl::NotFoundError(absl::StrCat("unknown dataset id '", dataset_id, "'"));
}

bool SameParams(const proto::JobParams& a, const proto::JobParams& b) {
  return a.dataset_id() == b.dataset_id() && a.processing_mode() == b.processing_mode() &&
         a.sharding_policy() == b.sharding_policy() && a.exactly_once() == b.exactly_once() &&
         a.num_consumers() == b.num_consumers() && a.deterministic() == b.deterministic();
}

}  // namespace

DispatcherImpl::DispatcherImpl(DispatcherConfig config, TaskPushFn push_task,
                               JournalFailureFn on_journal_failure)
    : config_(std::move(config)),
      push_task_(std::move(push_task)),
      on_journal_failure_(std::move(on_journal_failure)) {}

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
    absl::StatusOr<ClientSecrets> secrets = ClientSecrets::Open(config_.work_dir);
    if (!secrets.ok()) return secrets.status();
    client_secrets_ = *std::move(secrets);
  }
  monitor_ = std::thread([this] { RunMonitor(); });
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
  for (const auto& [address, worker] : state_.workers()) worker_activity_.NoteHeard(address, now);
  for (const auto& [id, task] : state_.tasks()) {
    if (!task.finished) crash_loop_.TaskStarted(id, now);
  }
  for (const auto& [id, iteration] : state_.iterations()) {
    for (int64_t client : iteration.clients) {
      client_activity_.NoteHeard(client, now);
      // Whether it was told its tasks is not journaled: assume so, so that
      // a consumer lost across the restart still fails its peers' end.
      if (!iteration.finished && !iteration.tasks.empty()) client_activity_.NoteToldTasks(client);
    }
    const auto* job = state_.FindJob(iteration.job_id);
    if (iteration.collected || job->params.processing_mode() != proto::DISTRIBUTED_EPOCH) continue;
    absl::StatusOr<std::unique_ptr<SplitProvider>> provider = NewSplitProvider(
        job->params, state_.FindDataset(job->params.dataset_id())->def, iteration.repetition);
    if (!provider.ok()) return provider.status();
    if (!iteration.split_cursor.empty()) {
      if (absl::Status s = (*provider)->Restore(iteration.split_cursor); !s.ok()) {
        return absl::DataLossError(absl::StrCat("iteration ", id, ": split cursor '", iteration.split_cursor,
                                                "' does not restore: ", s.message()));
      }
    }
    split_leaser_.Add(id, *std::move(provider));
  }
  journal_ = *std::move(journal);
  const int64_t replayed = journal_->records_since_snapshot();
  // Each start begins from one snapshot, so replays stay short.
  if (absl::Status s = WriteSnapshot(); !s.ok()) return s;
  spdlog::info("recovered from {}: {} records replayed{}; {} datasets, {} jobs, {} iterations, {} workers",
               config_.work_dir, replayed, recovered.snapshot.has_value() ? " after a snapshot" : "",
               state_.datasets().size(), state_.jobs().size(), state_.iterations().size(),
               state_.workers().size());
  return absl::OkStatus();
}

absl::Status DispatcherImpl::Apply(const proto::Update& update) {
  // The change becomes visible when mu_ is released, after the journal
  // has it on disk.
  if (!journal_failure_.ok()) return journal_failure_;
  // Refused before the state changes: the journal would refuse the record
  // and leave the state in memory ahead of the disk.
  if (journal_.has_value() && update.ByteSizeLong() > journal_->limits().max_record_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("the update takes ", update.ByteSizeLong(),
                                                     " bytes, more than the journal's record limit of ",
                                                     journal_->limits().max_record_bytes));
  }
  if (absl::Status s = state_.Apply(update); !s.ok()) return s;
  if (!journal_.has_value()) return absl::OkStatus();
  absl::Status status = journal_->Append(update);
  // Compacted once the journal is as large as the last snapshot too, so a
  // state of large definitions is not rewritten at each registration:
  // what is written stays within twice what is added.
  if (status.ok() &&
      (journal_->records_since_snapshot() >= config_.snapshot_interval ||
       journal_->bytes_since_snapshot() >= std::max(config_.snapshot_bytes, last_snapshot_bytes_))) {
    status = WriteSnapshot();
  }
  if (!status.ok()) {
    // The state in memory is ahead of the disk and cannot be taken back:
    // going on would lose it at the next restart.
    journal_failure_ =
        absl::UnavailableError(absl::StrCat("the dispatcher cannot write its journal in ", config_.work_dir,
                                            ": ", status.message(), "; it must be restarted"));
    if (on_journal_failure_) on_journal_failure_(journal_failure_);
    return journal_failure_;
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::WriteSnapshot() {
  const proto::StateSnapshot snapshot = state_.ToSnapshot();
  absl::Status status = journal_->WriteSnapshot(snapshot);
  // Refused or not, the next try waits until the journal is this large.
  last_snapshot_bytes_ = static_cast<int64_t>(snapshot.ByteSizeLong());
  // Too large to be read back (the quotas keep a state far smaller): the
  // journal since the last snapshot stays whole, so going on loses nothing.
  if (absl::IsResourceExhausted(status)) {
    spdlog::warn("journal: {}; keeping the journal since the last snapshot", std::string(status.message()));
    return absl::OkStatus();
  }
  return status;
}

bool DispatcherImpl::ApplyOrLog(const proto::Update& update, const std::string& what) {
  absl::Status status = Apply(update);
  if (!status.ok()) spdlog::error("{}: {}", what, std::string(status.message()));
  return status.ok();
}

const absl::StatusOr<SourceSplitInfo>& DispatcherImpl::SourceSplits(const std::string& dataset_id,
                                                                    const proto::DatasetDef& def) {
  auto known = source_splits_.find(dataset_id);
  if (known != source_splits_.end()) return known->second;
  absl::StatusOr<SourceSplitInfo> info = def.steps().empty()
                                             ? absl::InvalidArgumentError("the pipeline has no steps")
                                             : DescribeSourceSplits(def.steps(0));
  return source_splits_.emplace(dataset_id, std::move(info)).first->second;
}

SplitOptions DispatcherImpl::SplitOptionsFor(const proto::JobParams& params) const {
  SplitOptions options;
  options.elements_per_split = config_.elements_per_split;
  // Each split of an exactly_once job runs alone on its worker: whole
  // batches need splits cut along them.
  options.batch_aligned = params.exactly_once();
  return options;
}

std::string DispatcherImpl::SplitLayout(const proto::JobParams& params) {
  std::string layout = absl::StrCat("elements_per_split=", config_.elements_per_split);
  const DispatcherState::Dataset* dataset = state_.FindDataset(params.dataset_id());
  if (dataset == nullptr || !params.exactly_once()) return layout;
  const absl::StatusOr<SourceSplitInfo>& info = SourceSplits(dataset->id, dataset->def);
  if (!info.ok()) return layout;
  const int64_t per_split = PositionsPerSplit(dataset->def, info->per_file, SplitOptionsFor(params));
  if (per_split !=
      PositionsPerSplit(dataset->def, info->per_file, SplitOptions{config_.elements_per_split})) {
    absl::StrAppend(&layout, ",batch_aligned=", per_split, ",positions=", info->num_positions);
  }
  return layout;
}

absl::StatusOr<std::unique_ptr<SplitProvider>> DispatcherImpl::NewSplitProvider(
    const proto::JobParams& params, const proto::DatasetDef& def, int64_t repetition) {
  // Listed afresh for each new iteration, and kept: a status page view does
  // no file I/O under the lock, and a restore's split layout is checked
  // against the folder as it is now.
  if (def.steps().empty()) return absl::InvalidArgumentError("the pipeline has no steps");
  absl::StatusOr<SourceSplitInfo> info = DescribeSourceSplits(def.steps(0));
  source_splits_.insert_or_assign(params.dataset_id(), info);
  if (!info.ok()) return info.status();
  SplitOptions options = SplitOptionsFor(params);
  options.repetition = repetition;
  return MakeSplitProvider(def, options, *info);
}

void DispatcherImpl::PushTasks(const NewTasks& new_tasks) const {
  if (!push_task_) return;
  for (const auto& [address, def] : new_tasks) push_task_(address, def);
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

absl::Status DispatcherImpl::GetVersion(const proto::GetVersionRequest&, proto::GetVersionResponse* response,
                                        const Caller&) {
  response->set_protocol_version(kProtocolVersion);
  response->set_server_version(kServerVersion);
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetOrRegisterDataset(const proto::GetOrRegisterDatasetRequest& request,
                                                  proto::GetOrRegisterDatasetResponse* response,
                                                  const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  const std::string fingerprint = DatasetFingerprint(request.dataset());
  const std::string tenant = caller.Owner();
  // A tenant's explicit ids live in its own namespace, so that no tenant
  // learns of another's or takes its id.
  const std::string explicit_id = request.dataset_id().empty() || tenant.empty()
                                      ? request.dataset_id()
                                      : absl::StrCat(tenant, "/", request.dataset_id());
  absl::MutexLock lock(&mu_);
  if (!explicit_id.empty()) {
    if (const auto* existing = state_.FindDataset(explicit_id); existing != nullptr) {
      if (existing->fingerprint != fingerprint || existing->tenant != tenant) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dataset id '", request.dataset_id(), "' is already registered with a different definition"));
      }
      response->set_dataset_id(existing->id);
      return absl::OkStatus();
    }
  } else if (const auto* existing = state_.FindDatasetByFingerprint(fingerprint, tenant);
             existing != nullptr) {
    response->set_dataset_id(existing->id);
    return absl::OkStatus();
  }
  if (absl::Status s = CheckDatasetQuota(state_, config_, request.dataset(), tenant); !s.ok()) return s;
  // Built before registering, so a definition that cannot run is refused
  // with its reason rather than failing later on every worker.
  absl::StatusOr<DatasetPtr> built = BuildDataset(request.dataset());
  if (!built.ok()) return built.status();
  proto::Update update;
  auto* u = update.mutable_register_dataset();
  u->set_dataset_id(explicit_id.empty() ? state_.NextDatasetId() : explicit_id);
  u->set_fingerprint(fingerprint);
  u->set_tenant(tenant);
  *u->mutable_dataset() = request.dataset();
  if (absl::Status s = Apply(update); !s.ok()) return s;
  built_datasets_[u->dataset_id()] = *built;
  spdlog::info("registered dataset {} (fingerprint {})", u->dataset_id(), fingerprint);
  response->set_dataset_id(u->dataset_id());
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetDatasetInfo(const proto::GetDatasetInfoRequest& request,
                                            proto::GetDatasetInfoResponse* response, const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (const auto* dataset = state_.FindDataset(request.dataset_id());
      dataset != nullptr && !caller.MaySee(dataset->tenant)) {
    return UnknownDataset(request.dataset_id());
  }
  absl::StatusOr<DatasetPtr> built = Built(request.dataset_id());
  if (!built.ok()) return built.status();
  ElementSpecToProto((*built)->element_spec(), response->mutable_element_spec());
  response->set_cardinality((*built)->Cardinality());
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetOrCreateJob(const proto::GetOrCreateJobRequest& request,
                                            proto::GetOrCreateJobResponse* response, const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  const proto::JobParams& params = request.params();
  proto::JobParams job_params = params;
  if (absl::Status s = ResolveShardingPolicy(&job_params); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  const auto* dataset = state_.FindDataset(params.dataset_id());
  // Another tenant's dataset is as unknown as one never registered. The
  // job belongs to the dataset's tenant (the cluster may act for any).
  if (dataset == nullptr || !caller.MaySee(dataset->tenant)) return UnknownDataset(params.dataset_id());
  job_params.set_tenant(dataset->tenant);
  if (!params.job_name().empty()) {
    if (const auto* job = state_.FindJobByName(params.job_name(), job_params.tenant()); job != nullptr) {
      if (!SameParams(job->params, job_params)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "job '", params.job_name(), "' already exists for dataset ", job->params.dataset_id(), " in ",
            ProcessingModeName(job->params.processing_mode()), " mode; asked for dataset ",
            params.dataset_id(), " in ", ProcessingModeName(params.processing_mode()), " mode"));
      }
      response->set_job_id(job->id);
      return absl::OkStatus();
    }
  }
  if (absl::Status s = CheckJobQuota(state_, config_, job_params.tenant()); !s.ok()) return s;
  if (params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
    absl::StatusOr<std::unique_ptr<SplitProvider>> splits = MakeSplitProvider(dataset->def);
    if (!splits.ok()) return splits.status();
  }
  if (job_params.exactly_once()) {
    if (absl::Status s = CheckExactlyOnce(job_params, dataset->def); !s.ok()) return s;
  }
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
  spdlog::info("job {} created{}: dataset {}, {}", response->job_id(),
               job_params.job_name().empty() ? "" : absl::StrCat(" ('", job_params.job_name(), "')"),
               job_params.dataset_id(), ProcessingModeName(job_params.processing_mode()));
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
  absl::Status status = Apply(update);
  if (status.ok()) crash_loop_.TaskStarted(u->task_id(), Clock::now());
  return status;
}

absl::Status DispatcherImpl::GetOrCreateIteration(const proto::GetOrCreateIterationRequest& request,
                                                  proto::GetOrCreateIterationResponse* response,
                                                  const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  // New tasks go to their workers after the lock is released.
  NewTasks new_tasks;
  {
    absl::MutexLock lock(&mu_);
    const auto* job = state_.FindJob(request.job_id());
    if (job == nullptr || !caller.MaySee(job->params.tenant())) {
      return absl::NotFoundError(absl::StrCat("unknown job ", request.job_id()));
    }
    const int64_t num_consumers = job->params.num_consumers();
    if (num_consumers > 0 && (request.consumer_index() < 0 || request.consumer_index() >= num_consumers)) {
      return absl::InvalidArgumentError(absl::StrCat("consumer_index ", request.consumer_index(),
                                                     " is out of range for ", num_consumers, " consumers"));
    }
    const auto* iteration = state_.FindIterationForRepetition(job->id, request.repetition());
    // A shared job's repetition read again: tf.data ends it at once; the
    // client says so.
    response->set_already_finished(iteration != nullptr && iteration->finished);
    if (iteration != nullptr) response->set_epoch_key(iteration->epoch_key);
    if (iteration != nullptr && num_consumers > 0 &&
        iteration->consumers_joined.contains(request.consumer_index())) {
      return absl::FailedPreconditionError(
          absl::StrCat("job '", job->params.job_name(), "' is at round ", iteration_rounds_[iteration->id],
                       ": consumer ", request.consumer_index(), " has already joined; a set of ",
                       num_consumers, " coordinated consumers must start together at round 0"));
    }
    // Consumers of one iteration split its splits by who asks first, so a
    // second one would make both orders depend on timing; one joining after
    // another left would start inside splits the first had begun.
    if (iteration != nullptr && job->params.deterministic()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", job->params.job_name(), "' is deterministic and its repetition ", request.repetition(),
          " already has or had a consumer: another would take part of its splits, so no order could be "
          "reproduced (read it from one consumer, under a new job_name to read it again, or set "
          "deterministic: false)"));
    }
    if (iteration == nullptr) {
      if (absl::Status s = CheckIterationQuota(state_, config_, job->params.tenant()); !s.ok()) return s;
      if (absl::Status s = CheckRestoreKey(*job, request); !s.ok()) return s;
      const auto* dataset = state_.FindDataset(job->params.dataset_id());
      bool infinite = false;
      if (job->params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
        absl::StatusOr<std::unique_ptr<SplitProvider>> splits =
            NewSplitProvider(job->params, dataset->def, request.repetition());
        if (!splits.ok()) return splits.status();
        absl::StatusOr<DatasetPtr> built = Built(dataset->id);
        if (!built.ok()) return built.status();
        infinite = (*built)->Cardinality() == kInfiniteCardinality;
        split_leaser_.Add(state_.NextIterationId(), *std::move(splits));
      }
      proto::Update update;
      auto* u = update.mutable_create_iteration();
      u->set_iteration_id(state_.NextIterationId());
      u->set_job_id(job->id);
      u->set_repetition(request.repetition());
      u->set_epoch_key(request.epoch_key());
      response->set_epoch_key(request.epoch_key());
      u->set_infinite(infinite);
      if (!request.split_layout().empty() && request.split_layout() != SplitLayout(job->params)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "GetOrCreateIteration: the restored read was saved under split layout '", request.split_layout(),
            "' and this dispatcher cuts '", SplitLayout(job->params),
            "' (--elements-per-split), so split numbers would name other elements: restart it with the same "
            "setting"));
      }
      if (!request.skip_splits().empty()) {
        if (job->params.processing_mode() != proto::DISTRIBUTED_EPOCH || !job->params.exactly_once() ||
            infinite || request.split_layout().empty()) {
          return absl::FailedPreconditionError(
              "GetOrCreateIteration: skip_splits (a restored read) needs a distributed_epoch exactly_once "
              "job "
              "over a finite dataset, and the split_layout it was saved under");
        }
        *u->mutable_skip_splits() = request.skip_splits();
      }
      if (!request.skip_positions().empty()) {
        if (job->params.processing_mode() != proto::PARALLEL_EPOCHS || IsStaticSharding(job->params) ||
            num_consumers > 0) {
          return absl::FailedPreconditionError(
              "GetOrCreateIteration: skip_positions (a restored read) needs a parallel_epochs job, neither "
              "statically sharded nor coordinated");
        }
        *u->mutable_skip_positions() = request.skip_positions();
      }
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
    client_activity_.NoteHeard(acquire.acquire_iteration_client().iteration_client_id(), Clock::now());
    if (num_consumers > 0) {
      client_activity_.NoteConsumerIndex(acquire.acquire_iteration_client().iteration_client_id(),
                                         request.consumer_index());
    }
    response->set_iteration_id(iteration->id);
    if (job->params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
      response->set_split_layout(SplitLayout(job->params));
    }
    response->set_iteration_client_id(acquire.acquire_iteration_client().iteration_client_id());
    response->set_client_secret(client_secrets_.For(response->iteration_client_id()));
    response->set_restore_key(RestoreKey(*job, iteration->repetition));
  }
  PushTasks(new_tasks);
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
