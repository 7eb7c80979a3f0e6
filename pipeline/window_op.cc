// window: groups consecutive elements into windows of `size`, starting
// every `shift` elements and taking every `stride`-th, in tf.data's order.
// Where tf.data yields each window as a dataset, Sluice yields it as one
// element (each component stacked along a new first dimension), which a
// following flat_map's sub-pipeline reads with `from_tensor_slices` and no
// tensors of its own: tf.data's window(...).flat_map(lambda w: ...).
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/batch_util.h"
#include "pipeline/definition_limits.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

using internal::MakeUnaryIterator;
using internal::UnaryDataset;
using internal::UnaryIterator;

class WindowDataset : public UnaryDataset {
 public:
  WindowDataset(DatasetPtr input, int64_t size, int64_t shift, int64_t stride, bool drop_remainder)
      : UnaryDataset(input, BatchedSpec(input->element_spec(), drop_remainder ? size : kUnknownDim),
                     "window"),
        size_(size),
        shift_(shift),
        stride_(stride),
        drop_remainder_(drop_remainder) {}

  // tf.data's: a window starts every `shift` elements while one is left
  // (while a whole one is left, with drop_remainder).
  int64_t Cardinality() const override {
    const int64_t n = input()->Cardinality();
    if (n == kInfiniteCardinality || n == kUnknownCardinality) return n;
    if (!drop_remainder_) return (n + shift_ - 1) / shift_;
    const int64_t span = Span();
    return n < span ? 0 : (n - span) / shift_ + 1;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  // Input elements one window covers: (size - 1) * stride + 1.
  int64_t Span() const { return (size_ - 1) * stride_ + 1; }

  class Iterator : public UnaryIterator {
   public:
    Iterator(const WindowDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset) {}

    absl::Status GetNext(Element* element, bool* end) override {
      const int64_t span = dataset_->Span();
      while (!input_done_ && static_cast<int64_t>(buffer_.size()) < span) {
        Element next;
        bool input_end = false;
        if (absl::Status s = input_->GetNext(&next, &input_end); !s.ok()) return s;
        if (input_end) {
          input_done_ = true;
        } else {
          buffer_.push_back(std::move(next));
        }
      }
      const int64_t buffered = static_cast<int64_t>(buffer_.size());
      if (buffered == 0 || (dataset_->drop_remainder_ && buffered < span)) {
        *end = true;
        return absl::OkStatus();
      }
      std::vector<Element> window;
      for (int64_t i = 0; i < buffered && static_cast<int64_t>(window.size()) < dataset_->size_;
           i += dataset_->stride_) {
        window.push_back(buffer_[i]);
      }
      absl::StatusOr<Element> stacked = StackElements(window);
      if (!stacked.ok())
        return absl::Status(stacked.status().code(), absl::StrCat("window: ", stacked.status().message()));
      // Shift: drop `shift` elements, reading past the buffer when it is
      // shorter.
      if (dataset_->shift_ >= buffered) {
        for (int64_t i = buffered; !input_done_ && i < dataset_->shift_; ++i) {
          Element skipped;
          bool input_end = false;
          if (absl::Status s = input_->GetNext(&skipped, &input_end); !s.ok()) return s;
          input_done_ = input_end;
        }
        buffer_.clear();
      } else {
        buffer_.erase(buffer_.begin(), buffer_.begin() + dataset_->shift_);
      }
      *element = *std::move(stacked);
      *end = false;
      return absl::OkStatus();
    }

    // The buffered elements, whether the input ended, and its state.
    absl::Status Save(proto::IteratorState* state) override {
      for (const Element& e : buffer_) SaveElement(e, state);
      (*state->mutable_ints())["input_done"] = input_done_ ? 1 : 0;
      return SaveInput(*input_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<int64_t> input_done = StateInt(state, "input_done");
      if (!input_done.ok()) return input_done.status();
      absl::StatusOr<std::vector<Element>> elements = RestoreElements(state);
      if (!elements.ok()) return elements.status();
      if (static_cast<int64_t>(elements->size()) > dataset_->Span()) {
        return MalformedState("the window's buffer is longer than a window");
      }
      buffer_.assign(std::make_move_iterator(elements->begin()), std::make_move_iterator(elements->end()));
      input_done_ = *input_done != 0;
      return RestoreInput(*input_, state);
    }

   private:
    const WindowDataset* const dataset_;
    std::deque<Element> buffer_;
    bool input_done_ = false;
  };

  const int64_t size_;
  const int64_t shift_;
  const int64_t stride_;
  const bool drop_remainder_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeWindowDataset(DatasetPtr input, const proto::WindowOp& op) {
  if (absl::Status s = internal::RequirePositive(op.size(), "window", "size"); !s.ok()) return s;
  if (op.shift() < 0 || op.stride() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("window: shift and stride must be > 0 (or 0 or omitted: ",
                                                   "size and 1), got ", op.shift(), " and ", op.stride()));
  }
  // Bounded so that a window's span, (size - 1) * stride + 1, cannot overflow.
  if (op.size() > kMaxBatchSize || op.stride() > kMaxBatchSize) {
    return absl::InvalidArgumentError(absl::StrCat("window: size and stride must be at most ", kMaxBatchSize,
                                                   ", got ", op.size(), " and ", op.stride()));
  }
  return std::make_shared<WindowDataset>(std::move(input), op.size(), op.shift() > 0 ? op.shift() : op.size(),
                                         op.stride() > 0 ? op.stride() : 1, op.drop_remainder());
}

}  // namespace sluice
