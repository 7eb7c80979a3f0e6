// The building blocks of the single-input transforms (transform_ops.cc,
// batching_ops.cc): a dataset over one input, an iterator over one input
// iterator, and the argument check their factories share.
#ifndef SLUICE_PIPELINE_UNARY_DATASET_H_
#define SLUICE_PIPELINE_UNARY_DATASET_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pipeline/dataset.h"

namespace sluice::internal {

// A dataset with one input whose spec it may change; subclasses give the
// iterator and the cardinality.
class UnaryDataset : public DatasetBase {
 public:
  UnaryDataset(DatasetPtr input, ElementSpec spec, std::string name)
      : input_(std::move(input)), spec_(std::move(spec)), name_(std::move(name)) {}
  const ElementSpec& element_spec() const override { return spec_; }
  std::string DebugName() const override { return name_; }
  const DatasetPtr& input() const { return input_; }

 private:
  const DatasetPtr input_;
  const ElementSpec spec_;
  const std::string name_;
};

// An iterator over one input iterator, made from the same context.
class UnaryIterator : public IteratorBase {
 public:
  explicit UnaryIterator(std::unique_ptr<IteratorBase> input) : input_(std::move(input)) {}

 protected:
  std::unique_ptr<IteratorBase> input_;
};

template <typename IteratorType, typename DatasetType>
absl::StatusOr<std::unique_ptr<IteratorBase>> MakeUnaryIterator(const DatasetType* dataset,
                                                                const IteratorContext& context) {
  absl::StatusOr<std::unique_ptr<IteratorBase>> input = dataset->input()->MakeIterator(context);
  if (!input.ok()) return input.status();
  return std::make_unique<IteratorType>(dataset, *std::move(input));
}

// The cardinality after a step whose count depends on the values (rebatch,
// unique): an empty or infinite input stays so, anything else is unknown.
inline int64_t CardinalityOfValueDependentStep(int64_t input) {
  return input == kInfiniteCardinality || input == 0 ? input : kUnknownCardinality;
}

// InvalidArgument naming the op and the argument unless `value` > 0.
inline absl::Status RequirePositive(int64_t value, const char* op, const char* arg) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", arg, " must be > 0, got ", value));
}

}  // namespace sluice::internal

#endif  // SLUICE_PIPELINE_UNARY_DATASET_H_
