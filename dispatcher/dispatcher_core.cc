// DispatcherCore: start and recovery from the journal, Apply, split
// providers and the making of tasks, which every part of the dispatcher
// uses under its lock.
#include "dispatcher/dispatcher_core.h"

#include <google/protobuf/arena.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "pipeline/builder.h"
#include "pipeline/sandbox.h"
#include "pipeline/sharding.h"
#include "service/grpc_util.h"

namespace sluice::dispatcher {

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// Whether an update may change what a client's heartbeat lists: tasks
// (made, lost, their worker gone or back) and iterations ended. The
// frequent updates (leases, their delivery, finished tasks, clients)
// change no list.
bool ChangesTaskLists(const proto::Update& update) {
  switch (update.kind_case()) {
    case proto::Update::kLeaseSplits:
    case proto::Update::kCompleteSplits:
    case proto::Update::kCompleteTask:
    case proto::Update::kFinishTask:
    case proto::Update::kExtendRoundHorizon:
    case proto::Update::kAcquireIterationClient:
    case proto::Update::kReleaseIterationClient:
    case proto::Update::kRegisterDataset:
    case proto::Update::kCreateJob:
    case proto::Update::kCreateIteration:
    case proto::Update::kReportTakenPositions:
      return false;
    default:
      return true;
  }
}

// A snapshot and the arena its messages live on.
struct ArenaSnapshot {
  ArenaSnapshot() : arena(Options()) {}
  static google::protobuf::ArenaOptions Options() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 1 << 20;
    options.max_block_size = 8 << 20;
    return options;
  }
  google::protobuf::Arena arena;
  proto::StateSnapshot* snapshot = nullptr;
};

double Millis(DispatcherCore::Clock::duration duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

}  // namespace

DispatcherCore::DispatcherCore(DispatcherConfig config, TaskPushFn push_task,
                               JournalFailureFn on_journal_failure)
    : config_(std::move(config)),
      push_task_(std::move(push_task)),
      on_journal_failure_(std::move(on_journal_failure)),
      task_lists_version_(static_cast<int64_t>(std::random_device{}() >> 1) << 31 | 1) {}

DispatcherCore::~DispatcherCore() {
  std::thread writer;
  {
    absl::MutexLock lock(&mu_);
    writer = std::move(snapshot_writer_);
  }
  if (writer.joinable()) writer.join();
}

void DispatcherCore::WaitForSnapshot() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* writing) { return !*writing; }, &snapshot_writing_));
}

absl::Status DispatcherCore::Start() {
  if (config_.work_dir.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Recover(); !s.ok()) return s;
  journal_sync_ = journal_->sync();
  absl::StatusOr<ClientSecrets> secrets = ClientSecrets::Open(config_.work_dir);
  if (!secrets.ok()) return secrets.status();
  client_secrets_ = *std::move(secrets);
  return absl::OkStatus();
}

absl::Status DispatcherCore::Recover() {
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

absl::Status DispatcherCore::Apply(const proto::Update& update) {
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
  if (ChangesTaskLists(update)) ++task_lists_version_;
  if (!journal_.has_value()) return absl::OkStatus();
  // Written, not yet synced: the request waits for the disk after it lets
  // mu_ go (WaitForJournal), so that one sync serves many requests.
  absl::Status status = journal_->Write(update);
  // Compacted once the journal is as large as the last snapshot too, so a
  // state of large definitions is not rewritten at each registration:
  // what is written stays within twice what is added.
  if (status.ok() && !snapshot_writing_ &&
      (journal_->records_since_snapshot() >= config_.snapshot_interval ||
       journal_->bytes_since_snapshot() >= std::max(config_.snapshot_bytes, last_snapshot_bytes_))) {
    status = StartSnapshot();
  }
  if (!status.ok()) return FailJournal(status);
  return absl::OkStatus();
}

absl::Status DispatcherCore::FailJournal(const absl::Status& status) {
  if (!journal_failure_.ok()) return journal_failure_;
  // The state in memory is ahead of the disk and cannot be taken back:
  // going on would lose it at the next restart.
  journal_failure_ =
      absl::UnavailableError(absl::StrCat("the dispatcher cannot write its journal in ", config_.work_dir,
                                          ": ", status.message(), "; it must be restarted"));
  if (on_journal_failure_) on_journal_failure_(journal_failure_);
  return journal_failure_;
}

absl::Status DispatcherCore::WaitForJournal() {
  if (journal_sync_ == nullptr) return absl::OkStatus();
  absl::Status status = journal_sync_->SyncWritten();
  if (status.ok()) return status;
  absl::MutexLock lock(&mu_);
  return FailJournal(status);
}

absl::Status DispatcherCore::WriteSnapshot() {
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

absl::Status DispatcherCore::StartSnapshot() {
  const auto began = Clock::now();
  absl::StatusOr<int64_t> sequence = journal_->BeginSnapshot();
  if (!sequence.ok()) return sequence.status();
  const auto moved_on = Clock::now();
  // The state the files before the new journal file hold: taken under the
  // lock, where the journal moved on. On an arena: at 10,000 workers the
  // copy is tens of thousands of small messages, and it is what requests
  // still wait for.
  auto held = std::make_shared<ArenaSnapshot>();
  held->snapshot = google::protobuf::Arena::CreateMessage<proto::StateSnapshot>(&held->arena);
  state_.FillSnapshot(held->snapshot);
  if (snapshot_writer_.joinable()) snapshot_writer_.join();  // it has let mu_ go for good
  snapshot_writing_ = true;
  const auto locked = Clock::now();
  snapshot_writer_ = std::thread([this, held, began, moved_on, locked, sequence = *sequence,
                                  dir = journal_->dir(), limits = journal_->limits()] {
    const absl::Status status = Journal::WriteSnapshotFile(dir, sequence, *held->snapshot, limits);
    const auto bytes = static_cast<int64_t>(held->snapshot->ByteSizeLong());
    if (status.ok()) {
      // What a snapshot costs the requests (the part under the lock) and
      // the disk, for operators sizing snapshot_interval.
      spdlog::info(
          "journal: snapshot {} of {} bytes: {:.1f} ms under the lock "
          "({:.1f} ms to sync the journal file and start the next, {:.1f} ms to copy the state), "
          "written in {:.1f} ms",
          sequence, bytes, Millis(locked - began), Millis(moved_on - began), Millis(locked - moved_on),
          Millis(Clock::now() - locked));
    } else {
      spdlog::warn("journal: {}; the previous snapshot and the journal since stay in use",
                   std::string(status.message()));
    }
    absl::MutexLock lock(&mu_);
    // Refused or not, the next try waits until the journal is this large.
    last_snapshot_bytes_ = bytes;
    snapshot_writing_ = false;
  });
  return absl::OkStatus();
}

bool DispatcherCore::ApplyOrLog(const proto::Update& update, const std::string& what) {
  absl::Status status = Apply(update);
  if (!status.ok()) spdlog::error("{}: {}", what, std::string(status.message()));
  return status.ok();
}

const absl::StatusOr<SourceSplitInfo>& DispatcherCore::SourceSplits(const std::string& dataset_id,
                                                                    const proto::DatasetDef& def) {
  auto known = source_splits_.find(dataset_id);
  if (known != source_splits_.end()) return known->second;
  // Listed for the dataset's tenant, under its data roots.
  const DispatcherState::Dataset* dataset = state_.FindDataset(dataset_id);
  ScopedPipelineSandbox sandbox(TenantPipelineSandbox(dataset == nullptr ? "" : dataset->tenant));
  absl::StatusOr<SourceSplitInfo> info = def.steps().empty()
                                             ? absl::InvalidArgumentError("the pipeline has no steps")
                                             : DescribeSourceSplits(def.steps(0));
  return source_splits_.emplace(dataset_id, std::move(info)).first->second;
}

SplitOptions DispatcherCore::SplitOptionsFor(const proto::JobParams& params) const {
  SplitOptions options;
  options.elements_per_split = config_.elements_per_split;
  // Each split of an exactly_once job runs alone on its worker: whole
  // batches need splits cut along them.
  options.batch_aligned = params.exactly_once();
  return options;
}

std::string DispatcherCore::SplitLayout(const proto::JobParams& params) {
  std::string layout = absl::StrCat("elements_per_split=", config_.elements_per_split);
  const DispatcherState::Dataset* dataset = state_.FindDataset(params.dataset_id());
  if (dataset == nullptr) return layout;
  // A listing of objects names which objects the split numbers mean: the
  // same count of other objects (or sizes) is another layout.
  const bool lists_objects = !dataset->def.steps().empty() && SourceListsObjects(dataset->def.steps(0));
  if (!params.exactly_once() && !lists_objects) return layout;
  const absl::StatusOr<SourceSplitInfo>& info = SourceSplits(dataset->id, dataset->def);
  if (!info.ok()) return layout;
  if (params.exactly_once()) {
    const int64_t per_split = PositionsPerSplit(dataset->def, info->per_file, SplitOptionsFor(params));
    if (per_split !=
        PositionsPerSplit(dataset->def, info->per_file, SplitOptions{config_.elements_per_split})) {
      absl::StrAppend(&layout, ",batch_aligned=", per_split, ",positions=", info->num_positions);
    }
  }
  if (!info->object_listing.empty()) absl::StrAppend(&layout, ",objects=", info->object_listing);
  return layout;
}

absl::StatusOr<std::unique_ptr<SplitProvider>> DispatcherCore::NewSplitProvider(
    const proto::JobParams& params, const proto::DatasetDef& def, int64_t repetition) {
  // Listed afresh for each new iteration, and kept: a status page view does
  // no file I/O under the lock, and a restore's split layout is checked
  // against the folder as it is now.
  if (def.steps().empty()) return absl::InvalidArgumentError("the pipeline has no steps");
  ScopedPipelineSandbox sandbox(TenantPipelineSandbox(params.tenant()));
  absl::StatusOr<SourceSplitInfo> info = DescribeSourceSplits(def.steps(0));
  source_splits_.insert_or_assign(params.dataset_id(), info);
  if (!info.ok()) return info.status();
  SplitOptions options = SplitOptionsFor(params);
  options.repetition = repetition;
  return MakeSplitProvider(def, options, *info);
}

void DispatcherCore::PushTasks(const NewTasks& new_tasks) {
  if (!push_task_ || new_tasks.empty()) return;
  // A worker runs only tasks that a restart would still know.
  if (!WaitForJournal().ok()) return;
  for (const auto& [address, def] : new_tasks) push_task_(address, def);
}

absl::StatusOr<DatasetPtr> DispatcherCore::Built(const std::string& dataset_id) {
  auto cached = built_datasets_.find(dataset_id);
  if (cached != built_datasets_.end()) return cached->second;
  const DispatcherState::Dataset* dataset = state_.FindDataset(dataset_id);
  if (dataset == nullptr) return absl::NotFoundError(absl::StrCat("unknown dataset id '", dataset_id, "'"));
  ScopedPipelineSandbox sandbox(TenantPipelineSandbox(dataset->tenant));
  absl::StatusOr<DatasetPtr> built = BuildDataset(dataset->def);
  if (built.ok()) built_datasets_[dataset_id] = *built;
  return built;
}

absl::Status DispatcherCore::CreateTask(int64_t iteration_id, const std::string& worker_address,
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

void DispatcherCore::FillTaskDef(const DispatcherState::Task& task, proto::TaskDef* def) const {
  const auto* iteration = state_.FindIteration(task.iteration_id);
  const auto* job = state_.FindJob(iteration->job_id);
  def->set_task_id(task.id);
  def->set_iteration_id(task.iteration_id);
  def->set_read_secret(client_secrets_.ForTask(task.id));
  def->set_dispatcher_incarnation(client_secrets_.Incarnation());
  *def->mutable_dataset() = state_.FindDataset(job->params.dataset_id())->def;
  def->set_processing_mode(job->params.processing_mode());
  def->set_sharding_policy(job->params.sharding_policy());
  def->set_exactly_once(job->params.exactly_once());
  def->set_num_consumers(job->params.num_consumers());
  def->set_cross_trainer_cache_bytes(job->params.cross_trainer_cache_bytes());
  def->set_tenant(job->params.tenant());
  def->set_repetition(iteration->repetition);
  if (auto skip = iteration->skip_positions.find(task.worker_address);
      skip != iteration->skip_positions.end()) {
    AppendPairs(skip->second, def->mutable_skip_positions());
  }
  if (IsStaticSharding(job->params)) {
    const auto& workers = job->params.static_workers();
    def->set_num_shards(workers.size());
    def->set_shard_index(
        static_cast<int>(std::find(workers.begin(), workers.end(), task.worker_address) - workers.begin()));
  }
}

bool DispatcherCore::MayRunIn(const DispatcherState::Iteration& iteration, const std::string& address) const {
  if (iteration.error_code != 0 || state_.IsDraining(address)) return false;
  const bool whole_epoch_per_worker = WholeEpochPerWorker(state_.FindJob(iteration.job_id)->params);
  return std::none_of(iteration.tasks.begin(), iteration.tasks.end(), [&](int64_t id) {
    const auto* task = state_.FindTask(id);
    return task->worker_address == address && task->lost &&
           (whole_epoch_per_worker || absl::StartsWith(task->lost_reason, kUnreachableReason));
  });
}

}  // namespace sluice::dispatcher
