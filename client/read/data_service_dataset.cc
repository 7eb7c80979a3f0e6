#include "client/read/data_service_dataset.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/read/definition_checks.h"
#include "client/read/element_transport.h"
#include "client/read/epoch_losses.h"
#include "client/read/savability.h"
#include "client/read/service_read.h"
#include "client/read/split_deliveries.h"
#include "client/read/warnings.h"
#include "common/proto_convert.h"
#include "common/strings.h"
#include "pipeline/builder.h"
#include "pipeline/iterator_state.h"
#include "pipeline/sharding.h"
#include "service/compression.h"
#include "service/dispatcher_client.h"
#include "service/grpc_util.h"
#include "service/job_params.h"
#include "service/malloc_tuning.h"
#include "service/worker_positions.h"
#include "sluice/proto/service.grpc.pb.h"

namespace sluice::reader {
namespace {

// How long a client waits for a dispatcher that is not up yet, by default.
constexpr std::chrono::milliseconds kDefaultDispatcherDeadline(60000);
// ... and for one whose address refuses connections, or does not resolve.
constexpr std::chrono::milliseconds kRefusedAddressDeadline(10000);

// Whether gRPC's reason says that nothing listens at the address (or it
// does not resolve), as opposed to a peer that answers slowly.
bool NothingListens(absl::string_view reason) {
  return absl::StrContains(reason, "Connection refused") || absl::StrContains(reason, "failed to connect") ||
         absl::StrContains(reason, "DNS resolution failed") ||
         absl::StrContains(reason, "Name or service not known");
}

// What every iterator of one `distribute` step reads with.
struct ReadConfig {
  // The dispatcher's HOST:PORT. Each read makes its own client, so that a
  // built pipeline holds no gRPC channel: gRPC shut down between reads is
  // what lets a process fork (a DataLoader's workers) and the child read.
  std::string dispatcher_address;
  proto::JobParams params;
  int64_t cardinality = 0;
  int64_t max_outstanding = 0;
  std::chrono::milliseconds deadline{0};
  proto::WireCompression compression = proto::COMPRESSION_NONE;
  int64_t consumer_index = -1;  // coordinated reads; -1 otherwise
  bool allow_partial = false;
  // One of several peer readers of the job: their epoch's key
  // (DistributeOp.peer_epoch_key); empty for any other reader.
  std::string peer_epoch_key;
  // DistributeOp.peer_job_private.
  bool peer_job_private = false;
  // DistributeOp.cross_trainer_cache.trainer_id; empty without one.
  std::string trainer_id;
  TransportOptions transport;
  // Why the worker side may give other elements or another order on
  // another run (CheckDeterministicPipeline); OK when it cannot.
  absl::Status worker_side_determinism;
};

// What of the read decides whether it can be saved (savability.h).
ReadSavability SavabilityOf(const ReadConfig& config) {
  return ReadSavability{.params = config.params,
                        .consumer_index = config.consumer_index,
                        .trainer_id = config.trainer_id,
                        .worker_side_determinism = config.worker_side_determinism};
}

// Where a restored read resumes: what was delivered before the save, and
// for a job checkpoint, which of how many consumers this is.
struct ResumePoint {
  SplitDeliveries delivered;
  std::string state_bytes;  // the saved ServiceReadState, which names the job
  int64_t num_consumers = 1;
  // The repetition that was read, and the saved job's name.
  int64_t repetition = 0;
  std::string job_name;
};

// The job a restored read makes: a new anonymous one for one consumer;
// for several restoring one job checkpoint, one named after it (its
// deliveries and repetition), where they meet. Never the saved job itself,
// whose workers may have handed out more than the save recorded.
std::string RestoredJobName(const ResumePoint& resume) {
  if (resume.num_consumers <= 1) return "";
  // Named after the saved job, which the restore key names too (a
  // trainer's restoring run may name its own job otherwise).
  return absl::StrCat(resume.job_name.empty() ? "sluice" : resume.job_name, "@restore-",
                      Sha256Hex(resume.state_bytes, 6));
}

// Makes the job (or joins it) and the iteration for `*repetition`, and
// starts reading it. A peer reader that finds the repetition finished by
// readers of another epoch (a stale one) moves `*repetition` on to the
// next, and `repetitions` past it. `*joined_finished`: a reader that is no
// peer joined a repetition whose workers had finished.
absl::StatusOr<std::unique_ptr<ServiceRead>> StartRead(const ReadConfig& config, int64_t* repetition_io,
                                                       std::atomic<int64_t>& repetitions,
                                                       const ResumePoint* resume, bool* joined_finished) {
  int64_t& repetition = *repetition_io;
  if (resume != nullptr && resume->num_consumers > 1 && config.params.deterministic()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "restore: a deterministic read has one consumer at a time, so its job checkpoint resumes on 1 "
        "consumer, not ",
        resume->num_consumers));
  }
  // Elements arrive as a steady stream of large messages (service/malloc_tuning.h).
  TuneMallocForLargeMessages();
  if (absl::Status usable = CheckGrpcUsableAfterFork(); !usable.ok()) return usable;
  auto service = std::make_shared<DispatcherClient>(config.dispatcher_address);
  proto::GetOrCreateJobRequest job_request;
  *job_request.mutable_params() = config.params;
  if (resume != nullptr) {
    job_request.mutable_params()->set_job_name(RestoredJobName(*resume));
    // The saved repetition, in the new job: an exactly_once read's split
    // numbers name the files of that repetition's order.
    repetition = resume->repetition;
  }
  const std::string& job_name = job_request.params().job_name();
  // A restored read that cannot start says so.
  auto in_context = [resume, &job_name](const absl::Status& status) {
    if (resume == nullptr || status.ok()) return status;
    return absl::Status(status.code(), absl::StrCat("restoring a saved read (job '", job_name,
                                                    job_name.empty() ? "', a new anonymous one" : "'",
                                                    "): ", status.message()));
  };
  proto::GetOrCreateJobResponse job;
  absl::Status status = service->GetOrCreateJob(
      job_request, &job,
      {.retry_for = config.deadline, .what = absl::StrCat("creating a job at ", service->address())});
  if (!status.ok()) return in_context(status);
  proto::GetOrCreateIterationRequest iteration_request;
  iteration_request.set_job_id(job.job_id());
  if (resume == nullptr) iteration_request.set_epoch_key(config.peer_epoch_key);
  iteration_request.set_consumer_index(std::max<int64_t>(0, config.consumer_index));
  if (resume != nullptr) {
    for (int64_t seq : resume->delivered.DoneSplitPairs()) iteration_request.add_skip_splits(seq);
    if (config.params.processing_mode() == proto::DISTRIBUTED_EPOCH) {
      iteration_request.set_split_layout(resume->delivered.split_layout());
    }
    AppendWorkerRanges(resume->delivered.worker_positions(), iteration_request.mutable_skip_positions());
    iteration_request.set_restore_key(resume->delivered.restore_key());
    iteration_request.set_restore_job_name(resume->job_name);
    iteration_request.set_restore_job_id(resume->delivered.restore_job_id());
  }
  proto::GetOrCreateIterationResponse iteration;
  for (;;) {
    iteration_request.set_repetition(repetition);
    status = service->GetOrCreateIteration(
        iteration_request, &iteration,
        {.retry_for = config.deadline,
         .what = absl::StrCat("starting an iteration at ", service->address())});
    if (!status.ok()) return in_context(status);
    // A finished repetition that this reader's peers started was theirs
    // to read; one started by others is stale, and the next is this
    // epoch's. On a job of their own, so is one others left unfinished.
    // A dispatcher from before epoch keys names none: not stale.
    const bool others = !iteration.epoch_key().empty() && iteration.epoch_key() != config.peer_epoch_key;
    const bool stale = others && (iteration.already_finished() || config.peer_job_private);
    if (config.peer_epoch_key.empty() || resume != nullptr || !stale) break;
    ReleaseIterationClient(*service, iteration.iteration_client_id(), iteration.client_secret());
    ++repetition;
    int64_t next = repetitions.load();
    while (next <= repetition && !repetitions.compare_exchange_weak(next, repetition + 1)) {
    }
  }
  // Its workers have produced everything, though some may still be
  // buffered: the reader takes what is left, and one that finds nothing
  // says so rather than end an empty epoch (JoinedLateAndEmpty).
  *joined_finished = iteration.already_finished() && config.peer_epoch_key.empty();
  // In parallel_epochs every task runs the whole epoch, so a lost one cut
  // it short; in distributed_epoch its splits are read again, and static
  // shards are run again when their worker returns.
  std::optional<EpochLosses> losses;
  if (WholeEpochPerWorker(config.params) && config.consumer_index < 0) {
    // A restored task gives what the save left, not the whole epoch.
    losses.emplace(resume != nullptr ? -1 : config.cardinality, !job_name.empty(), config.allow_partial);
  }
  SplitDeliveries restored = resume != nullptr ? resume->delivered : SplitDeliveries();
  restored.set_split_layout(iteration.split_layout());
  // A restore into a job of its own keeps the key of the job it was saved
  // from, for a restore there later.
  if (restored.restore_key().empty()) restored.set_restore_key(iteration.restore_key());
  // An anonymous job's key names the job: the first one saved from.
  if (restored.restore_job_id() == 0 && job_name.empty()) restored.set_restore_job_id(job.job_id());
  return std::make_unique<ServiceRead>(
      std::move(service),
      ServiceReadOptions{.iteration_client_id = iteration.iteration_client_id(),
                         .client_secret = iteration.client_secret(),
                         .max_outstanding = config.max_outstanding,
                         .compression = config.compression,
                         .consumer_index = config.consumer_index,
                         // The dispatcher lets a deterministic job
                         // have one consumer at a time.
                         .sole_reader = job_name.empty() || config.params.deterministic(),
                         .exactly_once = config.params.exactly_once(),
                         .losses = std::move(losses),
                         .allow_partial = config.allow_partial,
                         .dispatcher_deadline = config.deadline,
                         .transport = config.transport,
                         .restored = std::move(restored),
                         .deterministic = config.params.deterministic(),
                         .track_worker_positions = SavesWorkerPositions(SavabilityOf(config)),
                         .lost_splits_repeat = config.params.processing_mode() == proto::DISTRIBUTED_EPOCH &&
                                               !config.params.exactly_once(),
                         .trainer_id = config.trainer_id});
}

class DataServiceDataset : public DatasetBase {
 public:
  DataServiceDataset(ReadConfig config, ElementSpec spec, std::shared_ptr<std::atomic<int64_t>> repetitions)
      : config_(std::make_shared<const ReadConfig>(std::move(config))),
        spec_(std::move(spec)),
        repetitions_(std::move(repetitions)) {}

  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override {
    // One repetition of a shared job may be split between consumers.
    return config_->params.job_name().empty() && config_->params.processing_mode() == proto::DISTRIBUTED_EPOCH
               ? config_->cardinality
               : kUnknownCardinality;
  }
  std::string DebugName() const override { return "distribute"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override;

 private:
  class Iterator;

  const std::shared_ptr<const ReadConfig> config_;
  const ElementSpec spec_;
  // The next iterator's repetition, shared with the dataset object's other
  // builds; a restore moves it past the saved one.
  const std::shared_ptr<std::atomic<int64_t>> repetitions_;
};

// Starts its read at once, or, when a restore is to follow, at its first
// GetNext, so that the restored iteration knows what to skip. Saves what
// GetNext has handed out (docs/design.md, "Iterator checkpoints").
class DataServiceDataset::Iterator : public IteratorBase {
 public:
  Iterator(std::shared_ptr<const ReadConfig> config, std::shared_ptr<std::atomic<int64_t>> repetitions)
      : config_(std::move(config)),
        repetitions_(std::move(repetitions)),
        repetition_(repetitions_->fetch_add(1)) {}

  absl::Status Start() {
    if (!start_status_.ok()) return start_status_;
    absl::StatusOr<std::unique_ptr<ServiceRead>> read = StartRead(
        *config_, &repetition_, *repetitions_, resume_.has_value() ? &*resume_ : nullptr, &joined_finished_);
    if (!read.ok()) {
      start_status_ = read.status();
      return start_status_;
    }
    read_ = *std::move(read);
    return absl::OkStatus();
  }
  // A job checkpoint's deliveries, before Start.
  absl::Status ResumeFrom(const ServiceResume& resume) {
    if (absl::Status s = CheckSavable(SavabilityOf(*config_)); !s.ok()) return s;
    from_job_checkpoint_ = true;
    return SetResume(resume.state, resume.num_consumers);
  }

  absl::Status GetNext(Element* element, bool* end) override {
    if (read_ == nullptr) {
      if (absl::Status s = Start(); !s.ok()) return s;
    }
    absl::Status status = read_->GetNext(element, end);
    if (!status.ok()) return status;
    if (!*end) {
      delivered_any_ = true;
    } else if (joined_finished_ && !delivered_any_) {
      return JoinedLateAndEmpty();
    }
    return status;
  }
  absl::Status Save(proto::IteratorState* state) override {
    if (absl::Status s = CheckSavable(SavabilityOf(*config_)); !s.ok()) return s;
    const SplitDeliveries delivered = read_ != nullptr
                                          ? read_->Delivered()
                                          : (resume_.has_value() ? resume_->delivered : SplitDeliveries());
    proto::ServiceReadState saved = delivered.ToProto();
    // A restored read continues the saved repetition.
    saved.set_repetition(resume_.has_value() ? resume_->repetition : repetition_);
    saved.set_job_name(resume_.has_value() ? resume_->job_name : config_->params.job_name());
    (*state->mutable_blobs())[kStateKey] = saved.SerializeAsString();
    return absl::OkStatus();
  }
  absl::Status Restore(const proto::IteratorState& state) override {
    if (absl::Status s = CheckSavable(SavabilityOf(*config_)); !s.ok()) return s;
    if (read_ != nullptr) return absl::FailedPreconditionError("distribute: restored after its first read");
    // The consumer's local steps come back with it, but what the service
    // delivered is the job checkpoint's union.
    if (from_job_checkpoint_) return absl::OkStatus();
    auto saved = state.blobs().find(kStateKey);
    if (saved == state.blobs().end()) return MalformedState("distribute: no service read state");
    if (absl::Status s = SetResume(saved->second, /*num_consumers=*/1); !s.ok()) return s;
    if (!resume_->job_name.empty()) {
      Warn(absl::StrCat(
          "restoring one consumer's saved read of shared job '", resume_->job_name,
          "': if other consumers read it too, merge all their states into a job checkpoint first "
          "(sluice.merge_saved_states in Python, sluice checkpoint merge on the command line), or the "
          "elements they had are read again"));
    }
    return absl::OkStatus();
  }

 private:
  static constexpr char kStateKey[] = "service_read";

  absl::Status SetResume(const std::string& bytes, int64_t num_consumers) {
    proto::ServiceReadState saved;
    if (!saved.ParseFromString(bytes))
      return MalformedState("distribute: the service read state does not parse");
    absl::StatusOr<SplitDeliveries> delivered = SplitDeliveries::FromProto(saved);
    if (!delivered.ok()) return MalformedState(std::string(delivered.status().message()));
    resume_ = ResumePoint{.delivered = *std::move(delivered),
                          .state_bytes = bytes,
                          .num_consumers = num_consumers,
                          .repetition = saved.repetition(),
                          .job_name = saved.job_name()};
    // The next iterator (the next epoch under `repeat`) reads the
    // repetition after the saved one.
    int64_t next = repetitions_->load();
    while (next <= saved.repetition() && !repetitions_->compare_exchange_weak(next, saved.repetition() + 1)) {
    }
    return absl::OkStatus();
  }

  const std::shared_ptr<const ReadConfig> config_;
  const std::shared_ptr<std::atomic<int64_t>> repetitions_;
  int64_t repetition_;
  std::optional<ResumePoint> resume_;
  bool from_job_checkpoint_ = false;
  // Never silently empty: a reader that joined a finished repetition of a
  // shared job and found nothing left.
  absl::Status JoinedLateAndEmpty() const {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", config_->params.job_name(), "' repetition ", repetition_,
        " was already read to its end by other consumers, so nothing is left for this one: each "
        "repetition of a shared job is read once, as in tf.data (iterate the same dataset again for its "
        "next repetition, or use another job_name to read the data again)"));
  }

  absl::Status start_status_;
  std::unique_ptr<ServiceRead> read_;
  bool joined_finished_ = false;
  bool delivered_any_ = false;
};

absl::StatusOr<std::unique_ptr<IteratorBase>> DataServiceDataset::MakeIterator(
    const IteratorContext& context) const {
  auto iterator = std::make_unique<Iterator>(config_, repetitions_);
  // The first iterator of a pipeline restored from a job checkpoint.
  if (context.service_resume != nullptr && !context.service_resume->taken.exchange(true)) {
    if (absl::Status s = iterator->ResumeFrom(*context.service_resume); !s.ok()) return s;
  }
  if (context.restoring) return iterator;
  if (absl::Status s = iterator->Start(); !s.ok()) return s;
  return iterator;
}

}  // namespace

absl::StatusOr<DatasetPtr> MakeDataServiceDataset(const proto::DatasetDef& worker_part,
                                                  const proto::DistributeOp& op,
                                                  std::shared_ptr<std::atomic<int64_t>> repetitions) {
  proto::JobParams params;
  if (absl::Status s = JobParamsFromDistribute(op, &params); !s.ok()) return s;
  if (absl::Status s = CheckSendable(worker_part); !s.ok()) return s;
  if (op.service().empty())
    return absl::InvalidArgumentError("distribute: missing 'service' (grpc://HOST:PORT)");
  absl::StatusOr<std::string> address = ParseServiceAddress(op.service());
  if (!address.ok()) return address.status();
  absl::StatusOr<proto::WireCompression> compression = ParseWireCompression(op.compression());
  if (!compression.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("distribute: ", compression.status().message()));
  }
  if (op.max_outstanding_requests() < 0) {
    return absl::InvalidArgumentError("distribute: max_outstanding_requests must be >= 0");
  }
  if (op.timeout_ms() < 0) return absl::InvalidArgumentError("distribute: timeout_ms must be >= 0");
  if (op.connections_per_worker() < 0 || op.connections_per_worker() > kMaxConnectionsPerWorker) {
    return absl::InvalidArgumentError(absl::StrCat("distribute: connections_per_worker must be 0 to ",
                                                   kMaxConnectionsPerWorker, ", got ",
                                                   op.connections_per_worker()));
  }
  if (!op.transport().empty() && op.transport() != "auto" && op.transport() != "tcp") {
    return absl::InvalidArgumentError(
        absl::StrCat("distribute: transport must be 'auto' or 'tcp', got '", op.transport(), "'"));
  }
  if (op.num_consumers() < 0 ||
      (op.num_consumers() > 0 && (op.consumer_index() < 0 || op.consumer_index() >= op.num_consumers()))) {
    return absl::InvalidArgumentError(absl::StrCat("distribute: consumer_index ", op.consumer_index(),
                                                   " is out of range for num_consumers ",
                                                   op.num_consumers()));
  }
  const std::chrono::milliseconds deadline =
      op.timeout_ms() > 0 ? std::chrono::milliseconds(op.timeout_ms()) : kDefaultDispatcherDeadline;
  if (absl::Status usable = CheckGrpcUsableAfterFork(); !usable.ok()) return usable;
  auto service = std::make_unique<DispatcherClient>(*address);

  proto::GetOrRegisterDatasetRequest register_request;
  *register_request.mutable_dataset() = worker_part;
  proto::GetOrRegisterDatasetResponse registered;
  // The first contact: a dispatcher not up yet is waited for, and the user
  // hears so after a second rather than only at the deadline.
  auto still_retrying = [&](const std::string& reason) {
    Warn(absl::StrCat(
        "the dispatcher at ", *address, " does not answer yet (", reason, "); retrying for up to ",
        (op.timeout_ms() <= 0 ? kRefusedAddressDeadline : deadline).count(),
        " ms (distribute(timeout_ms=...) in Python, timeout_ms in YAML, sluice read --timeout-ms)"));
  };
  // With the default deadline, an address where nothing listens (a typo,
  // a dispatcher not started) fails after 10 s naming it, not after 60:
  // only a dispatcher that answers slowly gets the rest of the minute. A
  // read already going keeps the long retry for one that went away.
  const bool default_deadline = op.timeout_ms() <= 0;
  const std::chrono::milliseconds first_window = default_deadline ? kRefusedAddressDeadline : deadline;
  absl::Status status =
      service->GetOrRegisterDataset(register_request, &registered,
                                    {.retry_for = first_window,
                                     .what = absl::StrCat("registering the dataset at ", *address),
                                     .still_retrying = still_retrying});
  if (default_deadline && absl::IsUnavailable(status)) {
    if (NothingListens(status.message())) {
      return absl::UnavailableError(absl::StrCat(
          "the dispatcher at ", *address, " refuses connections: nothing listens there (", status.message(),
          "); check the address and that dispatcherd runs, or give a dispatcher that is starting longer with "
          "distribute(timeout_ms=...)"));
    }
    status = service->GetOrRegisterDataset(register_request, &registered,
                                           {.retry_for = deadline - first_window,
                                            .what = absl::StrCat("registering the dataset at ", *address)});
  }
  if (absl::IsUnimplemented(status)) {
    return absl::UnimplementedError(absl::StrCat("the dispatcher at ", *address, ": ", status.message()));
  }
  if (!status.ok()) return status;
  proto::GetDatasetInfoRequest info_request;
  info_request.set_dataset_id(registered.dataset_id());
  proto::GetDatasetInfoResponse info;
  status = service->GetDatasetInfo(info_request, &info, {.retry_for = deadline});
  if (!status.ok()) return status;
  absl::StatusOr<ElementSpec> spec = ElementSpecFromProto(info.element_spec());
  if (!spec.ok()) return spec.status();

  params.set_dataset_id(registered.dataset_id());
  params.set_job_name(op.job_name());
  params.set_num_consumers(op.num_consumers());
  // Refused here, before a job is made, with what the dispatcher would say.
  if (params.cross_trainer_cache_bytes() > 0) {
    if (absl::Status s = CheckCrossTrainerCache(params, /*max_bytes=*/0); !s.ok()) return s;
    if (absl::Status s = CheckCrossTrainerCardinality(info.cardinality()); !s.ok()) return s;
  }
  // 0: the reader adapts its budget to the elements' size (read_state.h).
  const int64_t max_outstanding = op.max_outstanding_requests();
  const int64_t consumer_index = op.num_consumers() > 0 ? op.consumer_index() : -1;
  return std::make_shared<DataServiceDataset>(
      ReadConfig{.dispatcher_address = *address,
                 .params = std::move(params),
                 .cardinality = info.cardinality(),
                 .max_outstanding = max_outstanding,
                 .deadline = deadline,
                 .compression = *compression,
                 .consumer_index = consumer_index,
                 .allow_partial = op.allow_partial(),
                 .peer_epoch_key = op.peer_epoch_key(),
                 .peer_job_private = op.peer_job_private(),
                 .trainer_id = op.cross_trainer_cache().trainer_id(),
                 .transport = TransportOptions{.connections = static_cast<int>(
                                                   std::max<int64_t>(1, op.connections_per_worker())),
                                               .shared_memory = op.transport() != "tcp"},
                 .worker_side_determinism = CheckDeterministicPipeline(worker_part)},
      *std::move(spec), std::move(repetitions));
}

namespace {

// Every process that loads the client library reads `distribute` steps from
// the service, as SLUICE_REGISTER_ELEMENT_FUNCTION registers functions: the
// SDK and the sluice CLI build pipelines without a setup call.
const bool kDataServiceRegistered = [] {
  SetDistributeFactory(MakeDataServiceDataset);
  return true;
}();

}  // namespace

}  // namespace sluice::reader
