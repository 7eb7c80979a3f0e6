// DistributedIterator and the range-for loop of a DistributedDataset: the
// input pipeline's elements, split per replica, through the device
// prefetcher.
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/device/device_backend.h"
#include "client/device/device_prefetcher.h"
#include "client/distributed_dataset_state.h"
#include "client/replica_splitter.h"
#include "pipeline/iterator_state.h"
#include "pipeline/pipeline_restore.h"
#include "pipeline/replay_iterator.h"
#include "sluice/distribute.h"
#include "sluice/metrics.h"
#include "sluice/proto/checkpoint.pb.h"

namespace sluice {

// The most steps a caller may have taken ahead of its trainer and still
// save (the Python iterator reads one ahead).
constexpr size_t kMaxStepsReadAhead = 2;

class DistributedIterator::Impl {
 public:
  Impl(std::shared_ptr<const internal::DistributedDatasetState> state, std::unique_ptr<IteratorBase> input,
       std::vector<Element> replay, std::vector<std::shared_ptr<DeviceBackend>> backends, int depth,
       int packing_threads, std::vector<ElementSpec> element_spec)
      : state_(std::move(state)),
        input_(std::make_unique<ReplayIterator>(std::move(input), std::move(replay))),
        splitter_(input_.get(), state_->rows_per_replica, backends.size()),
        element_spec_(std::move(element_spec)),
        prefetcher_(
            std::move(backends),
            [this](std::vector<Element>* step, bool* end) { return NextStep(step, end); }, depth,
            packing_threads) {}

  absl::StatusOr<PerReplica> GetNext() {
    const int64_t taken = prefetcher_.steps_taken();
    // The prefetcher reads ahead on its own threads: the wait here, not
    // theirs, is the trainer's (sluice/metrics.h, NoteTrainerWait).
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<PerReplica> step = prefetcher_.GetNext();
    NoteTrainerWait(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    // Every step the producer made, or failed to, has its entry; the end
    // and a wait refused (the trainer holds every buffer) have none.
    if (prefetcher_.steps_taken() > taken) {
      absl::MutexLock lock(&ledger_mu_);
      if (!unreturned_.empty()) {
        // Kept a little longer, for a caller that reads ahead of its
        // trainer (Save(steps_read_ahead)).
        recent_.push_back(std::move(unreturned_.front()));
        unreturned_.pop_front();
        if (recent_.size() > kMaxStepsReadAhead) recent_.pop_front();
      }
    }
    return step;
  }
  const std::vector<ElementSpec>& element_spec() const { return element_spec_; }

  absl::StatusOr<std::string> Save(int steps_read_ahead) {
    if (steps_read_ahead < 0 || static_cast<size_t>(steps_read_ahead) > kMaxStepsReadAhead) {
      return absl::InvalidArgumentError(
          absl::StrCat("DistributedIterator::Save: steps_read_ahead must be 0 to ", kMaxStepsReadAhead,
                       ", not ", steps_read_ahead));
    }
    // The producer is between two steps while this holds input_mu_.
    absl::MutexLock input(&input_mu_);
    absl::MutexLock ledger(&ledger_mu_);
    if (static_cast<size_t>(steps_read_ahead) > recent_.size()) {
      return absl::FailedPreconditionError(absl::StrCat("DistributedIterator::Save: ", steps_read_ahead,
                                                        " steps read ahead, but GetNext returned only ",
                                                        recent_.size(), " steps"));
    }
    proto::PipelineCheckpoint checkpoint;
    checkpoint.set_version(kPipelineCheckpointVersion);
    checkpoint.set_fingerprint(state_->fingerprint);
    std::vector<Element> ahead;
    for (auto step = recent_.end() - steps_read_ahead; step != recent_.end(); ++step) {
      ahead.insert(ahead.end(), step->begin(), step->end());
    }
    for (const std::vector<Element>& step : unreturned_) ahead.insert(ahead.end(), step.begin(), step.end());
    if (absl::Status s = input_->SaveWith(ahead, checkpoint.mutable_root()); !s.ok()) return s;
    return checkpoint.SerializeAsString();
  }

 private:
  // The prefetch thread's source: a step, and the input elements it took
  // on record until the trainer has the step.
  absl::Status NextStep(std::vector<Element>* step, bool* end) {
    absl::MutexLock lock(&input_mu_);
    std::vector<Element> taken;
    input_->set_record(&taken);
    absl::Status status = splitter_.NextStep(step, end);
    input_->set_record(nullptr);
    if (!status.ok() || !*end) {
      // A failed step's elements are gone with its error.
      if (!status.ok()) taken.clear();
      absl::MutexLock ledger(&ledger_mu_);
      unreturned_.push_back(std::move(taken));
    }
    return status;
  }

  const std::shared_ptr<const internal::DistributedDatasetState> state_;  // outlives input_
  const std::unique_ptr<ReplayIterator> input_;
  ReplicaSplitter splitter_;
  const std::vector<ElementSpec> element_spec_;
  // Held while a step is taken from the input, and by Save.
  absl::Mutex input_mu_;
  absl::Mutex ledger_mu_;
  // The input elements of each step made and not yet returned, in order.
  std::deque<std::vector<Element>> unreturned_ ABSL_GUARDED_BY(ledger_mu_);
  // The input elements of the last steps returned, up to kMaxStepsReadAhead.
  std::deque<std::vector<Element>> recent_ ABSL_GUARDED_BY(ledger_mu_);
  // Last: its thread calls the splitter, so it stops before the rest goes.
  DevicePrefetcher prefetcher_;
};

DistributedIterator::DistributedIterator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DistributedIterator::DistributedIterator(DistributedIterator&&) noexcept = default;
DistributedIterator& DistributedIterator::operator=(DistributedIterator&&) noexcept = default;
DistributedIterator::~DistributedIterator() = default;

absl::StatusOr<PerReplica> DistributedIterator::GetNext() { return impl_->GetNext(); }

absl::StatusOr<std::optional<PerReplica>> DistributedIterator::GetNextAsOptional() {
  absl::StatusOr<PerReplica> step = impl_->GetNext();
  if (step.ok()) return std::optional<PerReplica>(*std::move(step));
  if (absl::IsOutOfRange(step.status())) return std::optional<PerReplica>();
  return step.status();
}

const std::vector<ElementSpec>& DistributedIterator::element_spec() const { return impl_->element_spec(); }

absl::StatusOr<std::string> DistributedIterator::Save(int steps_read_ahead) {
  return impl_->Save(steps_read_ahead);
}

absl::StatusOr<DistributedIterator> DistributedDataset::MakeIterator() const {
  std::vector<std::shared_ptr<DeviceBackend>> backends;
  for (const Device& device : replicas_.devices()) {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = MakeDeviceBackend(device);
    if (!backend.ok()) return backend.status();
    backends.push_back(*std::move(backend));
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> input = state_->dataset->MakeIterator(IteratorContext{});
  if (!input.ok()) return input.status();
  return DistributedIterator(std::make_unique<DistributedIterator::Impl>(
      state_, *std::move(input), std::vector<Element>(), std::move(backends), options_.prefetch_buffer_size,
      options_.packing_threads, element_spec_));
}

absl::StatusOr<DistributedIterator> DistributedDataset::MakeIterator(const std::string& restore_from,
                                                                     const RestoreOptions& options) const {
  std::vector<std::shared_ptr<DeviceBackend>> backends;
  for (const Device& device : replicas_.devices()) {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = MakeDeviceBackend(device);
    if (!backend.ok()) return backend.status();
    backends.push_back(*std::move(backend));
  }
  absl::StatusOr<RestoredIterator> restored = RestoreParts(
      *state_->dataset, state_->fingerprint, restore_from,
      RestoreAs{.num_consumers = options.num_consumers, .consumer_index = options.consumer_index});
  if (!restored.ok()) return restored.status();
  return DistributedIterator(std::make_unique<DistributedIterator::Impl>(
      state_, std::move(restored->iterator), std::move(restored->replay), std::move(backends),
      options_.prefetch_buffer_size, options_.packing_threads, element_spec_));
}

DistributedDataset::LoopIterator::LoopIterator(std::shared_ptr<DistributedIterator> iterator,
                                               std::shared_ptr<absl::Status> status)
    : iterator_(std::move(iterator)), status_(std::move(status)), done_(iterator_ == nullptr) {}

DistributedDataset::LoopIterator& DistributedDataset::LoopIterator::operator++() {
  current_ = PerReplica();  // drop the last step's buffers before the next
  absl::StatusOr<PerReplica> step = iterator_->GetNext();
  if (step.ok()) {
    current_ = *std::move(step);
    return *this;
  }
  if (!absl::IsOutOfRange(step.status())) *status_ = step.status();
  done_ = true;
  iterator_ = nullptr;
  return *this;
}

DistributedDataset::LoopIterator DistributedDataset::begin() const {
  *loop_status_ = absl::OkStatus();
  absl::StatusOr<DistributedIterator> iterator = MakeIterator();
  if (!iterator.ok()) {
    *loop_status_ = iterator.status();
    return end();
  }
  LoopIterator loop(std::make_shared<DistributedIterator>(*std::move(iterator)), loop_status_);
  ++loop;
  return loop;
}

}  // namespace sluice
