// JobRpcs: the requests that make what clients read: datasets (registered
// once per definition and tenant), jobs, and iterations with their tasks
// and iteration clients, including a restored read's (its restore key).
#include "dispatcher/job_rpcs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "dispatcher/request_checks.h"
#include "dispatcher/shared_exactly_once.h"
#include "dispatcher/tenant_quotas.h"
#include "pipeline/builder.h"
#include "pipeline/sandbox.h"
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
         a.num_consumers() == b.num_consumers() && a.deterministic() == b.deterministic() &&
         a.cross_trainer_cache_bytes() == b.cross_trainer_cache_bytes();
}

// A job's name without the "@restore-..." of the job a merged restore
// makes for it: a read saved there restores as one of the job itself.
std::string BaseJobName(const std::string& name) { return name.substr(0, name.find("@restore-")); }

}  // namespace

JobRpcs::JobRpcs(DispatcherCore& core) : core_(core) {}

absl::Status JobRpcs::GetOrRegisterDataset(const proto::GetOrRegisterDatasetRequest& request,
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
  absl::MutexLock lock(&core_.mu_);
  if (!explicit_id.empty()) {
    if (const auto* existing = core_.state_.FindDataset(explicit_id); existing != nullptr) {
      if (existing->fingerprint != fingerprint || existing->tenant != tenant) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dataset id '", request.dataset_id(), "' is already registered with a different definition"));
      }
      response->set_dataset_id(existing->id);
      return absl::OkStatus();
    }
  } else if (const auto* existing = core_.state_.FindDatasetByFingerprint(fingerprint, tenant);
             existing != nullptr) {
    response->set_dataset_id(existing->id);
    return absl::OkStatus();
  }
  if (absl::Status s = CheckDatasetQuota(core_.state_, core_.config_, request.dataset(), tenant); !s.ok())
    return s;
  // Built before registering, so a definition that cannot run is refused
  // with its reason rather than failing later on every worker.
  absl::StatusOr<DatasetPtr> built = [&] {
    ScopedPipelineSandbox sandbox(TenantPipelineSandbox(tenant));
    return BuildDataset(request.dataset());
  }();
  if (!built.ok()) return built.status();
  proto::Update update;
  auto* u = update.mutable_register_dataset();
  u->set_dataset_id(explicit_id.empty() ? core_.state_.NextDatasetId() : explicit_id);
  u->set_fingerprint(fingerprint);
  u->set_tenant(tenant);
  *u->mutable_dataset() = request.dataset();
  if (absl::Status s = core_.Apply(update); !s.ok()) return s;
  core_.built_datasets_[u->dataset_id()] = *built;
  spdlog::info("registered dataset {} (fingerprint {})", u->dataset_id(), fingerprint);
  response->set_dataset_id(u->dataset_id());
  return absl::OkStatus();
}

absl::Status JobRpcs::GetDatasetInfo(const proto::GetDatasetInfoRequest& request,
                                     proto::GetDatasetInfoResponse* response, const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  absl::MutexLock lock(&core_.mu_);
  if (const auto* dataset = core_.state_.FindDataset(request.dataset_id());
      dataset != nullptr && !caller.MaySee(dataset->tenant)) {
    return UnknownDataset(request.dataset_id());
  }
  absl::StatusOr<DatasetPtr> built = core_.Built(request.dataset_id());
  if (!built.ok()) return built.status();
  ElementSpecToProto((*built)->element_spec(), response->mutable_element_spec());
  response->set_cardinality((*built)->Cardinality());
  return absl::OkStatus();
}

absl::Status JobRpcs::GetOrCreateJob(const proto::GetOrCreateJobRequest& request,
                                     proto::GetOrCreateJobResponse* response, const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  const proto::JobParams& params = request.params();
  proto::JobParams job_params = params;
  if (absl::Status s = ResolveShardingPolicy(&job_params); !s.ok()) return s;
  absl::MutexLock lock(&core_.mu_);
  const auto* dataset = core_.state_.FindDataset(params.dataset_id());
  // Another tenant's dataset is as unknown as one never registered. The
  // job belongs to the dataset's tenant (the cluster may act for any).
  if (dataset == nullptr || !caller.MaySee(dataset->tenant)) return UnknownDataset(params.dataset_id());
  job_params.set_tenant(dataset->tenant);
  if (!params.job_name().empty()) {
    if (const auto* job = core_.state_.FindJobByName(params.job_name(), job_params.tenant());
        job != nullptr) {
      if (job->params.cross_trainer_cache_bytes() != job_params.cross_trainer_cache_bytes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "job '", params.job_name(), "' already exists with cross_trainer_cache max_bytes ",
            job->params.cross_trainer_cache_bytes(), "; asked for ", job_params.cross_trainer_cache_bytes(),
            " (0: none): every trainer of a shared job gives the same cross_trainer_cache max_bytes"));
      }
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
  if (absl::Status s = CheckJobQuota(core_.state_, core_.config_, job_params.tenant()); !s.ok()) return s;
  if (params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
    absl::StatusOr<std::unique_ptr<SplitProvider>> splits = MakeSplitProvider(dataset->def);
    if (!splits.ok()) return splits.status();
  }
  if (job_params.exactly_once()) {
    if (absl::Status s = CheckExactlyOnce(job_params, dataset->def); !s.ok()) return s;
  }
  if (job_params.cross_trainer_cache_bytes() != 0) {
    if (absl::Status s = CheckCrossTrainerCache(job_params, core_.config_.max_cross_trainer_cache_bytes);
        !s.ok())
      return s;
    absl::StatusOr<DatasetPtr> built = core_.Built(params.dataset_id());
    if (!built.ok()) return built.status();
    if (absl::Status s = CheckCrossTrainerCardinality((*built)->Cardinality()); !s.ok()) return s;
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
    absl::StatusOr<DatasetPtr> built = core_.Built(params.dataset_id());
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
    if (core_.config_.worker_addresses.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sharding policy ", policy,
          " needs the dispatcher's worker_addresses (the workers to shard over, in order); it has none"));
    }
    // Sharded here once for shard 0, so a pipeline that cannot be sharded
    // this way (too few files, no SHARD_HINT) is refused now.
    proto::DatasetDef sharded = dataset->def;
    if (absl::Status s = ShardForWorker(job_params.sharding_policy(),
                                        static_cast<int>(core_.config_.worker_addresses.size()), 0, &sharded);
        !s.ok()) {
      return s;
    }
    for (const std::string& address : core_.config_.worker_addresses) job_params.add_static_workers(address);
  }
  proto::Update update;
  update.mutable_create_job()->set_job_id(core_.state_.NextJobId());
  *update.mutable_create_job()->mutable_params() = job_params;
  if (absl::Status s = core_.Apply(update); !s.ok()) return s;
  response->set_job_id(update.create_job().job_id());
  spdlog::info("job {} created{}: dataset {}, {}", response->job_id(),
               job_params.job_name().empty() ? "" : absl::StrCat(" ('", job_params.job_name(), "')"),
               job_params.dataset_id(), ProcessingModeName(job_params.processing_mode()));
  return absl::OkStatus();
}

absl::Status JobRpcs::GetOrCreateIteration(const proto::GetOrCreateIterationRequest& request,
                                           proto::GetOrCreateIterationResponse* response,
                                           const Caller& caller) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  // New tasks go to their workers after the lock is released.
  NewTasks new_tasks;
  {
    absl::MutexLock lock(&core_.mu_);
    const auto* job = core_.state_.FindJob(request.job_id());
    if (job == nullptr || !caller.MaySee(job->params.tenant())) {
      return absl::NotFoundError(absl::StrCat("unknown job ", request.job_id()));
    }
    const int64_t num_consumers = job->params.num_consumers();
    if (num_consumers > 0 && (request.consumer_index() < 0 || request.consumer_index() >= num_consumers)) {
      return absl::InvalidArgumentError(absl::StrCat("consumer_index ", request.consumer_index(),
                                                     " is out of range for ", num_consumers, " consumers"));
    }
    const auto* iteration = core_.state_.FindIterationForRepetition(job->id, request.repetition());
    // A shared job's repetition read again: tf.data ends it at once; the
    // client says so.
    response->set_already_finished(iteration != nullptr && iteration->finished);
    if (iteration != nullptr) response->set_epoch_key(iteration->epoch_key);
    if (iteration != nullptr && num_consumers > 0 &&
        iteration->consumers_joined.contains(request.consumer_index())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", job->params.job_name(), "' is at round ", core_.iteration_rounds_[iteration->id],
          ": consumer ", request.consumer_index(), " has already joined; a set of ", num_consumers,
          " coordinated consumers must start together at round 0"));
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
    if (iteration != nullptr) {
      if (absl::Status s = CheckJoinAfterLoss(core_.state_, *iteration); !s.ok()) return s;
    }
    if (iteration == nullptr) {
      if (absl::Status s = CheckIterationQuota(core_.state_, core_.config_, job->params.tenant()); !s.ok())
        return s;
      if (absl::Status s = CheckRestoreKey(*job, request); !s.ok()) return s;
      // What the restores this one supersedes hold is freed with it.
      const std::vector<int64_t> superseded = SupersededRestores(*job, request);
      int64_t freed = 0;
      for (int64_t id : superseded) freed += RestoreNumbers(*core_.state_.FindIteration(id));
      if (absl::Status s = CheckRestoreQuota(core_.state_, core_.config_, job->params.tenant(),
                                             std::max<int64_t>(0, RestoreNumbers(request) - freed));
          !s.ok()) {
        return s;
      }
      const auto* dataset = core_.state_.FindDataset(job->params.dataset_id());
      bool infinite = false;
      if (job->params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
        absl::StatusOr<std::unique_ptr<SplitProvider>> splits =
            core_.NewSplitProvider(job->params, dataset->def, request.repetition());
        if (!splits.ok()) return splits.status();
        absl::StatusOr<DatasetPtr> built = core_.Built(dataset->id);
        if (!built.ok()) return built.status();
        infinite = (*built)->Cardinality() == kInfiniteCardinality;
        core_.split_leaser_.Add(core_.state_.NextIterationId(), *std::move(splits));
      }
      proto::Update update;
      auto* u = update.mutable_create_iteration();
      u->set_iteration_id(core_.state_.NextIterationId());
      u->set_job_id(job->id);
      u->set_repetition(request.repetition());
      u->set_epoch_key(request.epoch_key());
      response->set_epoch_key(request.epoch_key());
      u->set_infinite(infinite);
      if (!request.split_layout().empty() && request.split_layout() != core_.SplitLayout(job->params)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "GetOrCreateIteration: the restored read was saved under split layout '", request.split_layout(),
            "' and this dispatcher cuts '", core_.SplitLayout(job->params),
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
      if (IsAnonymousRestore(*job, request)) u->set_restored_from_job(request.restore_job_id());
      for (int64_t id : superseded) {
        proto::Update fail;
        fail.mutable_fail_iteration()->set_iteration_id(id);
        fail.mutable_fail_iteration()->set_code(static_cast<int>(absl::StatusCode::kAborted));
        fail.mutable_fail_iteration()->set_message(absl::StrCat(
            "a newer restore of the same saved read (anonymous job ", request.restore_job_id(),
            ", repetition ", request.repetition(),
            ") started, and one saved state restores into one running read at a time; this read was "
            "superseded"));
        if (absl::Status s = core_.Apply(fail); !s.ok()) return s;
        spdlog::info("iteration {} superseded by a newer restore of anonymous job {}", id,
                     request.restore_job_id());
      }
      if (absl::Status s = core_.Apply(update); !s.ok()) return s;
      for (const auto& [address, worker] : core_.state_.workers()) {
        // A draining worker is leaving: it takes no new task.
        if (!RunsOn(job->params, address) || core_.state_.IsDraining(address)) continue;
        const int64_t task_id = core_.state_.NextTaskId();
        if (absl::Status s = core_.CreateTask(u->iteration_id(), address, /*joins_running_iteration=*/false);
            !s.ok()) {
          return s;
        }
        core_.FillTaskDef(*core_.state_.FindTask(task_id),
                          &new_tasks.emplace_back(address, proto::TaskDef()).second);
      }
      if (num_consumers > 0) {
        proto::Update horizon;
        horizon.mutable_extend_round_horizon()->set_iteration_id(u->iteration_id());
        horizon.mutable_extend_round_horizon()->set_horizon(core_.config_.round_window);
        if (absl::Status s = core_.Apply(horizon); !s.ok()) return s;
      }
      iteration = core_.state_.FindIteration(u->iteration_id());
      spdlog::info("iteration {} (job {}, repetition {}) has {} tasks", iteration->id, job->id,
                   request.repetition(), iteration->tasks.size());
    }
    proto::Update acquire;
    acquire.mutable_acquire_iteration_client()->set_iteration_client_id(core_.state_.NextIterationClientId());
    acquire.mutable_acquire_iteration_client()->set_iteration_id(iteration->id);
    acquire.mutable_acquire_iteration_client()->set_consumer_index(
        num_consumers > 0 ? request.consumer_index() : -1);
    if (absl::Status s = core_.Apply(acquire); !s.ok()) return s;
    core_.client_activity_.NoteHeard(acquire.acquire_iteration_client().iteration_client_id(), Clock::now());
    if (num_consumers > 0) {
      core_.client_activity_.NoteConsumerIndex(acquire.acquire_iteration_client().iteration_client_id(),
                                               request.consumer_index());
    }
    response->set_iteration_id(iteration->id);
    if (job->params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
      response->set_split_layout(core_.SplitLayout(job->params));
    }
    response->set_iteration_client_id(acquire.acquire_iteration_client().iteration_client_id());
    response->set_client_secret(core_.client_secrets_.For(response->iteration_client_id()));
    response->set_restore_key(RestoreKey(*job, iteration->repetition));
  }
  core_.PushTasks(new_tasks);
  return absl::OkStatus();
}

std::string JobRpcs::RestoreKey(const DispatcherState::Job& job, int64_t repetition) const {
  if (!core_.restore_keys_.has_value()) return "";
  const std::string& fingerprint = core_.state_.FindDataset(job.params.dataset_id())->fingerprint;
  // An anonymous job has no name to be found by again: its id names it,
  // so that its key restores it and nothing else (issue 50, finding 4).
  if (job.params.job_name().empty()) {
    return core_.restore_keys_->ForAnonymousRestore(job.params.tenant(), job.id, fingerprint, repetition);
  }
  return core_.restore_keys_->ForRestore(job.params.tenant(), BaseJobName(job.params.job_name()), fingerprint,
                                         repetition);
}

bool JobRpcs::IsAnonymousRestore(const DispatcherState::Job& job,
                                 const proto::GetOrCreateIterationRequest& request) {
  return job.params.job_name().empty() && request.restore_job_name().empty() &&
         request.restore_job_id() > 0 &&
         (!request.skip_splits().empty() || !request.skip_positions().empty());
}

std::vector<int64_t> JobRpcs::SupersededRestores(const DispatcherState::Job& job,
                                                 const proto::GetOrCreateIterationRequest& request) const {
  std::vector<int64_t> superseded;
  if (!IsAnonymousRestore(job, request)) return superseded;
  const std::string& fingerprint = core_.state_.FindDataset(job.params.dataset_id())->fingerprint;
  // What the key names: tenant, dataset, saved job and repetition.
  for (const auto& [id, iteration] : core_.state_.iterations()) {
    if (iteration.restored_from_job != request.restore_job_id() ||
        iteration.repetition != request.repetition() || iteration.finished) {
      continue;
    }
    const proto::JobParams& params = core_.state_.FindJob(iteration.job_id)->params;
    if (params.tenant() == job.params.tenant() &&
        core_.state_.FindDataset(params.dataset_id())->fingerprint == fingerprint) {
      superseded.push_back(id);
    }
  }
  return superseded;
}

absl::Status JobRpcs::CheckRestoreKey(const DispatcherState::Job& job,
                                      const proto::GetOrCreateIterationRequest& request) const {
  if ((request.skip_splits().empty() && request.skip_positions().empty()) ||
      !core_.restore_keys_.has_value()) {
    return absl::OkStatus();
  }
  // A restore makes an anonymous job, or one named after the saved job.
  const std::string saved = BaseJobName(request.restore_job_name());
  if (!job.params.job_name().empty() && BaseJobName(job.params.job_name()) != saved) {
    return absl::PermissionDeniedError(absl::StrCat("GetOrCreateIteration: a read saved from job '", saved,
                                                    "' cannot restore into job ", job.id, " ('",
                                                    job.params.job_name(), "')"));
  }
  // The key is given only to readers of that repetition of the saved job,
  // so whoever has it could not have squatted it: it existed already.
  DispatcherState::Job saved_job = job;
  saved_job.params.set_job_name(saved);
  if (saved.empty()) {
    if (request.restore_job_id() <= 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "GetOrCreateIteration: a restored read of an anonymous job into job ", job.id,
          " names no restore_job_id, which its restore_key is bound to (a state saved by a Sluice release "
          "before restore keys were bound to anonymous jobs cannot be restored where auth is on)"));
    }
    saved_job.id = request.restore_job_id();
  }
  if (SameSecret(request.restore_key(), RestoreKey(saved_job, request.repetition()))) return absl::OkStatus();
  // Anyone who may name a job could otherwise create its repetition with
  // most of it skipped, and its readers would end at once, "whole".
  return absl::PermissionDeniedError(absl::StrCat(
      "GetOrCreateIteration: skip_splits or skip_positions (a restored read) for job ", job.id,
      job.params.job_name().empty() ? "" : absl::StrCat(" ('", job.params.job_name(), "')"),
      " need the restore_key ",
      request.restore_key().empty() ? "that the saved state holds, and there is none"
                                    : absl::StrCat("of a state saved from repetition ", request.repetition(),
                                                   " of this job on this cluster, and this one is not"),
      " (a state saved by a Sluice release before restore keys, or on another cluster, cannot be restored "
      "where auth is on)"));
}

}  // namespace sluice::dispatcher
