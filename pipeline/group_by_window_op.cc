// group_by_window: tf.data's group_by_window with key_fn, a registered
// element function giving an integer key, and window_size. Elements go to
// the group of their key; a group of window_size elements is given at once,
// and at the input's end the groups left are given in increasing key order,
// as tf.data flushes them. Where tf.data hands each window as a dataset to a
// reduce_func, Sluice gives it as one element with each component stacked,
// as window does, so that a following flat_map's sub-pipeline (reading it
// with `from_tensor_slices` and no tensors) is the reduce_func.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/batch_util.h"
#include "pipeline/definition_limits.h"
#include "pipeline/grouping_util.h"
#include "pipeline/ops.h"

namespace sluice {
namespace {

using internal::GroupingIterator;
using internal::IntegerFunction;
using internal::MakeUnaryIterator;
using internal::UnaryDataset;

constexpr char kOp[] = "group_by_window";

class GroupByWindowDataset : public UnaryDataset {
 public:
  GroupByWindowDataset(DatasetPtr input, IntegerFunction key_fn, int64_t window_size, std::string name)
      : UnaryDataset(input, BatchedSpec(input->element_spec(), kUnknownDim), std::move(name)),
        key_fn_(std::move(key_fn)),
        window_size_(window_size) {}
  int64_t Cardinality() const override {
    return internal::CardinalityOfValueDependentStep(input()->Cardinality());
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public GroupingIterator {
   public:
    Iterator(const GroupByWindowDataset* dataset, std::unique_ptr<IteratorBase> input)
        : GroupingIterator(std::move(input), kOp, /*drop_remainder=*/false), dataset_(dataset) {}

   protected:
    absl::StatusOr<int64_t> KeyOf(const Element& element) const override {
      return dataset_->key_fn_(element);
    }
    // Any key may come, each with windows of one size.
    int64_t GroupSize(int64_t) const override { return dataset_->window_size_; }
    absl::StatusOr<Element> Reduce(int64_t, const std::vector<Element>& group) const override {
      absl::StatusOr<Element> stacked = StackElements(group);
      if (!stacked.ok()) return internal::AsOpError(stacked.status(), kOp);
      return stacked;
    }

   private:
    const GroupByWindowDataset* const dataset_;
  };

  const IntegerFunction key_fn_;
  const int64_t window_size_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeGroupByWindowDataset(DatasetPtr input, const proto::GroupByWindowOp& op) {
  if (op.key_fn().name().empty()) {
    return absl::InvalidArgumentError("group_by_window: missing 'key_fn', the function that gives each key");
  }
  if (absl::Status s = internal::RequirePositive(op.window_size(), kOp, "window_size"); !s.ok()) return s;
  if (op.window_size() > kMaxBatchSize) {
    return absl::InvalidArgumentError(absl::StrCat("group_by_window: window_size must be at most ",
                                                   kMaxBatchSize, ", got ", op.window_size()));
  }
  absl::StatusOr<IntegerFunction> key_fn =
      IntegerFunction::Create(op.key_fn(), input->element_spec(), kOp, "key_fn");
  if (!key_fn.ok()) return key_fn.status();
  std::string name = absl::StrCat("group_by_window(", op.key_fn().name(), ")");
  return std::make_shared<GroupByWindowDataset>(std::move(input), *std::move(key_fn), op.window_size(),
                                                std::move(name));
}

}  // namespace sluice
