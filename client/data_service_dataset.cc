#include "client/data_service_dataset.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/coordinated_reader.h"
#include "client/definition_checks.h"
#include "client/element_transport.h"
#include "client/epoch_losses.h"
#include "client/iteration_heartbeat.h"
#include "client/read_state.h"
#include "client/task_reader.h"
#include "client/warnings.h"
#include "common/proto_convert.h"
#include "pipeline/builder.h"
#include "pipeline/sharding.h"
#include "service/compression.h"
#include "service/dispatcher_client.h"
#include "service/grpc_util.h"
#include "service/job_params.h"
#include "service/malloc_tuning.h"
#include "service/metrics.h"
#include "sluice/service.grpc.pb.h"

namespace sluice {
namespace {

// How long a client waits for a dispatcher that is not up yet, by default.
constexpr std::chrono::milliseconds kDefaultDispatcherDeadline(60000);

class DataServiceDataset : public DatasetBase {
 public:
  DataServiceDataset(std::shared_ptr<DispatcherClient> service, proto::JobParams params, ElementSpec spec,
                     int64_t cardinality, int64_t max_outstanding, std::chrono::milliseconds deadline,
                     proto::WireCompression compression, int64_t consumer_index, bool allow_partial,
                     TransportOptions transport)
      : consumer_index_(consumer_index),
        allow_partial_(allow_partial),
        transport_(transport),
        deadline_(deadline),
        compression_(compression),
        service_(std::move(service)),
        params_(std::move(params)),
        spec_(std::move(spec)),
        cardinality_(cardinality),
        max_outstanding_(max_outstanding) {}

  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override {
    // One repetition of a shared job may be split between consumers.
    return params_.job_name().empty() && params_.processing_mode() == proto::DISTRIBUTED_EPOCH
               ? cardinality_
               : kUnknownCardinality;
  }
  std::string DebugName() const override { return "distribute"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext&) const override;

 private:
  class Iterator;

  const int64_t consumer_index_;  // coordinated reads; -1 otherwise
  const bool allow_partial_;
  const TransportOptions transport_;
  const std::chrono::milliseconds deadline_;
  const proto::WireCompression compression_;
  const std::shared_ptr<DispatcherClient> service_;
  const proto::JobParams params_;
  const ElementSpec spec_;
  const int64_t cardinality_;
  const int64_t max_outstanding_;
  mutable std::atomic<int64_t> repetitions_{0};
};

// Reads one iteration: a heartbeat thread learns the tasks, and either a
// fetch thread per request slot of each task (task_reader.h) or, for a
// coordinated read, one round thread (coordinated_reader.h) pulls elements
// into one buffer (read_state.h). Buffered plus requested elements never
// exceed max_outstanding, which bounds memory.
class DataServiceDataset::Iterator : public IteratorBase {
 public:
  // `sole_reader`: no other consumer shares the job (it has no name).
  // `losses`: set for a parallel_epochs read, whose lost tasks cut it short.
  // `allow_partial`: losses end the read with a warning, not DataLoss.
  // `dispatcher_deadline`: how long the dispatcher may go unheard before
  // the read fails.
  // `client_secret`: proves to the dispatcher that this client may
  // release `iteration_client_id`.
  Iterator(std::shared_ptr<DispatcherClient> service, int64_t max_outstanding, int64_t iteration_client_id,
           std::string client_secret, proto::WireCompression compression, int64_t consumer_index,
           bool sole_reader, bool exactly_once, std::optional<EpochLosses> losses, bool allow_partial,
           std::chrono::milliseconds dispatcher_deadline, TransportOptions transport)
      : service_(std::move(service)),
        allow_partial_(allow_partial),
        client_id_(iteration_client_id),
        client_secret_(std::move(client_secret)),
        state_(max_outstanding, sole_reader, std::move(losses), transport, exactly_once),
        fetches_(state_, compression),
        rounds_(state_, compression, consumer_index),
        heartbeat_(state_, *service_, iteration_client_id, absl::FromChrono(dispatcher_deadline),
                   consumer_index >= 0 ? nullptr : &fetches_) {
    heartbeat_thread_ = std::thread([this] { heartbeat_.HeartbeatLoop(); });
    if (consumer_index >= 0) rounds_thread_ = std::thread([this] { rounds_.RoundLoop(); });
  }

  ~Iterator() override {
    {
      absl::MutexLock lock(&state_.mu);
      state_.cancelled = true;
    }
    heartbeat_thread_.join();
    if (rounds_thread_.joinable()) rounds_thread_.join();
    // Only the heartbeat adds tasks, and it has stopped.
    for (auto& [id, task] : state_.tasks) {
      for (std::thread& thread : task.threads) thread.join();
    }
    proto::ReleaseIterationClientRequest request;
    request.set_iteration_client_id(client_id_);
    request.set_client_secret(client_secret_);
    proto::ReleaseIterationClientResponse response;
    // Best effort: a client not released is released after client_timeout_ms.
    (void)service_->ReleaseIterationClient(request, &response, {.attempt_timeout = std::chrono::seconds(2)});
  }

  absl::Status GetNext(Element* element, bool* end) override {
    static Counter& waited = ProcessMetrics()
                                 .AddCounter("sluice_client_wait_seconds_total",
                                             "time the trainer waited for elements from the service")
                                 .Get();
    absl::MutexLock lock(&state_.mu);
    // The clock is read only when there is a wait: an element already
    // buffered costs nothing more.
    if (!state_.CanReturn()) {
      const auto start = std::chrono::steady_clock::now();
      state_.mu.Await(absl::Condition(&state_, &ReadState::CanReturn));
      waited.Increment(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!state_.buffer.empty()) {
      *element = std::move(state_.buffer.front());
      state_.buffer.pop_front();
      *end = false;
      return absl::OkStatus();
    }
    if (!state_.status.ok()) return state_.status;
    if (!state_.positions.gapped().empty()) {
      // A response was lost in transit while its worker lived on, so no
      // rerun filled the gap: say so rather than end short.
      return absl::DataLossError(absl::StrCat("exactly_once: elements of split ",
                                              *state_.positions.gapped().begin(),
                                              " were lost in transit and never read again"));
    }
    // A read ends normally only when it delivered everything its mode
    // promises (docs/design.md, "What a read promises"); judged once, so
    // that an accepted partial epoch warns once.
    if (!end_status_.has_value()) {
      end_status_ =
          state_.losses.has_value()
              ? state_.losses->Finish(static_cast<int64_t>(state_.tasks.size()) + state_.unseen_lost_tasks)
              : absl::OkStatus();
      if (end_status_->ok()) end_status_ = state_.TransitLossesOfEndedTasks().Finish(allow_partial_);
    }
    if (!end_status_->ok()) return *end_status_;
    *end = true;
    return absl::OkStatus();
  }

 private:
  // Constant after construction.
  const std::shared_ptr<DispatcherClient> service_;
  const bool allow_partial_;
  const int64_t client_id_;
  const std::string client_secret_;

  ReadState state_;
  TaskReader fetches_;
  CoordinatedReader rounds_;
  IterationHeartbeat heartbeat_;
  // How the read ends, once judged.
  std::optional<absl::Status> end_status_ ABSL_GUARDED_BY(state_.mu);
  // Started last, joined first: they use everything above.
  std::thread heartbeat_thread_;
  std::thread rounds_thread_;  // coordinated reads only
};

absl::StatusOr<std::unique_ptr<IteratorBase>> DataServiceDataset::MakeIterator(const IteratorContext&) const {
  // Elements arrive as a steady stream of large messages (service/malloc_tuning.h).
  TuneMallocForLargeMessages();
  proto::GetOrCreateJobRequest job_request;
  *job_request.mutable_params() = params_;
  proto::GetOrCreateJobResponse job;
  absl::Status status = service_->GetOrCreateJob(
      job_request, &job,
      {.retry_for = deadline_, .what = absl::StrCat("creating a job at ", service_->address())});
  if (!status.ok()) return status;
  proto::GetOrCreateIterationRequest iteration_request;
  iteration_request.set_job_id(job.job_id());
  const int64_t repetition = repetitions_.fetch_add(1);
  iteration_request.set_repetition(repetition);
  iteration_request.set_consumer_index(std::max<int64_t>(0, consumer_index_));
  proto::GetOrCreateIterationResponse iteration;
  status = service_->GetOrCreateIteration(
      iteration_request, &iteration,
      {.retry_for = deadline_, .what = absl::StrCat("starting an iteration at ", service_->address())});
  if (!status.ok()) return status;
  if (iteration.already_finished()) {
    Warn(absl::StrCat("job '", params_.job_name(), "' repetition ", repetition,
                      " already finished: nothing to read (each repetition of a shared job is read once, as "
                      "in tf.data; use another job_name to read the data again)"));
  }
  // In parallel_epochs every task runs the whole epoch, so a lost one cut
  // it short; in distributed_epoch its splits are read again, and static
  // shards are run again when their worker returns.
  std::optional<EpochLosses> losses;
  if (params_.processing_mode() == proto::PARALLEL_EPOCHS && !IsStaticPolicy(params_.sharding_policy()) &&
      consumer_index_ < 0) {
    losses.emplace(cardinality_, !params_.job_name().empty(), allow_partial_);
  }
  return std::make_unique<Iterator>(service_, max_outstanding_, iteration.iteration_client_id(),
                                    iteration.client_secret(), compression_, consumer_index_,
                                    params_.job_name().empty(), params_.exactly_once(), std::move(losses),
                                    allow_partial_, deadline_, transport_);
}

}  // namespace

absl::StatusOr<DatasetPtr> MakeDataServiceDataset(const proto::DatasetDef& worker_part,
                                                  const proto::DistributeOp& op) {
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
  auto service = std::make_shared<DispatcherClient>(*address);

  proto::GetOrRegisterDatasetRequest register_request;
  *register_request.mutable_dataset() = worker_part;
  proto::GetOrRegisterDatasetResponse registered;
  // The first contact: a dispatcher not up yet is waited for, and the user
  // hears so after a second rather than only at the deadline.
  auto still_retrying = [&](const std::string& reason) {
    Warn(absl::StrCat("the dispatcher at ", *address, " does not answer yet (", reason,
                      "); retrying for up to ", deadline.count(),
                      " ms (timeout_ms, sluice read --timeout-ms)"));
  };
  absl::Status status =
      service->GetOrRegisterDataset(register_request, &registered,
                                    {.retry_for = deadline,
                                     .what = absl::StrCat("registering the dataset at ", *address),
                                     .still_retrying = still_retrying});
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
  // 0: the reader adapts its budget to the elements' size (read_state.h).
  const int64_t max_outstanding = op.max_outstanding_requests();
  const int64_t consumer_index = op.num_consumers() > 0 ? op.consumer_index() : -1;
  return std::make_shared<DataServiceDataset>(
      std::move(service), std::move(params), *std::move(spec), info.cardinality(), max_outstanding, deadline,
      *compression, consumer_index, op.allow_partial(),
      TransportOptions{.connections = static_cast<int>(std::max<int64_t>(1, op.connections_per_worker())),
                       .shared_memory = op.transport() != "tcp"});
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

}  // namespace sluice
