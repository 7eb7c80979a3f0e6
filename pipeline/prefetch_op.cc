// prefetch: runs its input on one background thread, a buffer of
// elements ahead; MakeBackgroundIterator serves other steps the same way.
#include <deque>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/exceptions.h"
#include "common/large_buffer_allocator.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/sandbox.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

using internal::UnaryDataset;
using internal::UnaryIterator;

// Runs its input on a background thread, up to `capacity` elements ahead.
class BackgroundIterator : public UnaryIterator {
 public:
  BackgroundIterator(std::unique_ptr<IteratorBase> input, int64_t capacity, bool start_at_first_read)
      : UnaryIterator(std::move(input)), capacity_(capacity) {
    if (!start_at_first_read) producer_ = ThreadInAllocatorScope([this] { ProduceForTenant(); });
  }
  ~BackgroundIterator() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    if (producer_.joinable()) producer_.join();
  }

  // The buffered elements and the input's position after them, taken while
  // the producer waits between two reads.
  absl::Status Save(proto::IteratorState* state) override {
    {
      absl::MutexLock lock(&mu_);
      paused_ = true;
      mu_.Await(absl::Condition(
          +[](bool* producing) { return !*producing; }, &producing_));
      for (const Element& e : buffer_) SaveElement(e, state);
      (*state->mutable_ints())["done"] = done_ ? 1 : 0;
      SaveStatus(status_, state);
    }
    absl::Status status = SaveInput(*input_, state);
    absl::MutexLock lock(&mu_);
    paused_ = false;
    return status;
  }

  // Before the first GetNext, so before the producer starts.
  absl::Status Restore(const proto::IteratorState& state) override {
    absl::StatusOr<int64_t> done = StateInt(state, "done");
    absl::StatusOr<absl::Status> status = RestoreStatus(state);
    absl::StatusOr<std::vector<Element>> elements = RestoreElements(state);
    if (!done.ok()) return done.status();
    if (!status.ok()) return status.status();
    if (!elements.ok()) return elements.status();
    if (absl::Status s = RestoreInput(*input_, state); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    buffer_.assign(std::make_move_iterator(elements->begin()), std::make_move_iterator(elements->end()));
    done_ = *done != 0;
    status_ = *status;
    return absl::OkStatus();
  }

  absl::Status GetNext(Element* element, bool* end) override {
    absl::MutexLock lock(&mu_);
    // Started by the first read unless at construction, so that Restore
    // comes first.
    if (!producer_.joinable() && !done_) producer_ = ThreadInAllocatorScope([this] { ProduceForTenant(); });
    mu_.Await(absl::Condition(this, &BackgroundIterator::ReadyForConsumer));
    if (!buffer_.empty()) {
      *element = std::move(buffer_.front());
      buffer_.pop_front();
      *end = false;
      return absl::OkStatus();
    }
    *end = true;
    return status_;
  }

 private:
  bool ReadyForConsumer() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !buffer_.empty() || done_; }
  bool ReadyForProducer() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || (!paused_ && static_cast<int64_t>(buffer_.size()) < capacity_);
  }

  void Produce() {
    // On its own thread, where nothing else would catch what the input
    // throws (or a failed allocation here). Nothing below allocates: a
    // throw here would end the whole process.
    absl::Status status = CallContained("prefetch", [this] { return ProduceUntilEnd(); });
    absl::MutexLock lock(&mu_);
    // Out of memory, the buffer is most likely what took it: the error
    // comes now, with the memory back, rather than after up to `capacity`
    // elements more (millions, for a large prefetch of small elements).
    if (IsAllocationFailure(status)) buffer_.clear();
    status_ = status;
    done_ = true;
  }

  // Fills the buffer until the input ends or fails, or the consumer goes.
  absl::Status ProduceUntilEnd() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &BackgroundIterator::ReadyForProducer));
        if (cancelled_) return absl::OkStatus();
        producing_ = true;
      }
      Element element;
      bool end = false;
      absl::Status status = input_->GetNext(&element, &end);
      absl::MutexLock lock(&mu_);
      producing_ = false;
      if (!status.ok() || end) return status;
      buffer_.push_back(std::move(element));
    }
  }

  const int64_t capacity_;
  absl::Mutex mu_;
  std::deque<Element> buffer_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;     // Save is running
  bool producing_ ABSL_GUARDED_BY(mu_) = false;  // the producer is reading the input
  std::thread producer_;                         // started by the first GetNext
  // The tenant's sandbox of the thread that made the iterator: the
  // producer reads its input under it.
  const std::shared_ptr<const PipelineSandbox> sandbox_ = ThreadPipelineSandbox();

  void ProduceForTenant() {
    ScopedPipelineSandbox scope(sandbox_);
    Produce();
  }
};

// Runs the input on a background thread, `buffer_size` elements ahead.
class PrefetchDataset : public UnaryDataset {
 public:
  PrefetchDataset(DatasetPtr input, int64_t buffer_size)
      : UnaryDataset(input, input->element_spec(), "prefetch"), buffer_size_(buffer_size) {}
  int64_t Cardinality() const override { return input()->Cardinality(); }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    absl::StatusOr<std::unique_ptr<IteratorBase>> input = this->input()->MakeIterator(context);
    if (!input.ok()) return input.status();
    // Its producer starts at the first read, after a Restore.
    return std::make_unique<BackgroundIterator>(*std::move(input), buffer_size_,
                                                /*start_at_first_read=*/true);
  }

 private:
  const int64_t buffer_size_;
};

}  // namespace

std::unique_ptr<IteratorBase> MakeBackgroundIterator(std::unique_ptr<IteratorBase> input, int64_t capacity,
                                                     bool start_at_first_read) {
  return std::make_unique<BackgroundIterator>(std::move(input), capacity, start_at_first_read);
}

absl::StatusOr<DatasetPtr> MakePrefetchDataset(DatasetPtr input, const proto::PrefetchOp& op) {
  if (op.buffer_size() == 0 || op.buffer_size() < -1) {
    return absl::InvalidArgumentError("prefetch: buffer_size must be > 0, or -1 for autotune");
  }
  // Autotune picks a fixed depth; it covers one slow element behind another.
  const int64_t size = op.buffer_size() == -1 ? 8 : op.buffer_size();
  return std::make_shared<PrefetchDataset>(std::move(input), size);
}

}  // namespace sluice
