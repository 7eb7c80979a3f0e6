// DistributedIterator and the range-for loop of a DistributedDataset: the
// input pipeline's elements, split per replica, through the device
// prefetcher.
#include <memory>
#include <utility>
#include <vector>

#include "client/device_backend.h"
#include "client/device_prefetcher.h"
#include "client/distributed_dataset_state.h"
#include "client/replica_splitter.h"
#include "sluice/distribute.h"

namespace sluice {

class DistributedIterator::Impl {
 public:
  Impl(std::shared_ptr<const internal::DistributedDatasetState> state, std::unique_ptr<IteratorBase> input,
       std::vector<std::shared_ptr<DeviceBackend>> backends, int depth, int packing_threads,
       std::vector<ElementSpec> element_spec)
      : state_(std::move(state)),
        input_(std::move(input)),
        splitter_(input_.get(), state_->rows_per_replica, backends.size()),
        element_spec_(std::move(element_spec)),
        prefetcher_(
            std::move(backends),
            [this](std::vector<Element>* step, bool* end) { return splitter_.NextStep(step, end); }, depth,
            packing_threads) {}

  absl::StatusOr<PerReplica> GetNext() { return prefetcher_.GetNext(); }
  const std::vector<ElementSpec>& element_spec() const { return element_spec_; }

 private:
  const std::shared_ptr<const internal::DistributedDatasetState> state_;  // outlives input_
  const std::unique_ptr<IteratorBase> input_;
  ReplicaSplitter splitter_;
  const std::vector<ElementSpec> element_spec_;
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
      state_, *std::move(input), std::move(backends), options_.prefetch_buffer_size, options_.packing_threads,
      element_spec_));
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
