// What group_by_window and bucket_by_sequence_length share: both are
// tf.data's group_by_window underneath (bucket_by_sequence_length keys an
// element by its length's bucket), so both put each element in a group by an
// integer key, give a group out as one element as soon as it holds its size,
// and at the input's end give the groups left in increasing key order, as
// tf.data's GroupByWindowDataset flushes its std::map.
#ifndef SLUICE_PIPELINE_GROUPING_UTIL_H_
#define SLUICE_PIPELINE_GROUPING_UTIL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/function.h"
#include "pipeline/unary_dataset.h"
#include "sluice/element.h"

namespace sluice::internal {

// A registered element function that gives each element one integer
// (group_by_window's key_fn, bucket_by_sequence_length's length_fn); its
// output spec is checked at build time to be one int32 or int64 scalar.
class IntegerFunction {
 public:
  // `op` and `arg` name the function in errors, as
  // "group_by_window: key_fn 'less' returns ...".
  static absl::StatusOr<IntegerFunction> Create(const proto::FunctionDef& def, const ElementSpec& input,
                                                const std::string& op, const std::string& arg);
  absl::StatusOr<int64_t> operator()(const Element& element) const;

 private:
  IntegerFunction(std::unique_ptr<ElementFunction> fn, std::string where)
      : fn_(std::move(fn)), where_(std::move(where)) {}

  std::unique_ptr<ElementFunction> fn_;
  std::string where_;  // "group_by_window: key_fn 'mod'"
};

// `status` from a batching helper ("batch: ..." or "padded_batch: ...")
// as op's own: "group_by_window: ...".
absl::Status AsOpError(const absl::Status& status, const std::string& op);

// The iterator of both ops. A subclass says which group an element goes to,
// how many elements fill a group, and what a group becomes.
class GroupingIterator : public UnaryIterator {
 public:
  // `op` names the op in restore errors; with `drop_remainder`, the groups
  // left at the input's end are dropped rather than given.
  GroupingIterator(std::unique_ptr<IteratorBase> input, std::string op, bool drop_remainder)
      : UnaryIterator(std::move(input)), op_(std::move(op)), drop_remainder_(drop_remainder) {}

  absl::Status GetNext(Element* element, bool* end) final;
  // Whether the input ended, its state, then per group (in key order) a
  // sub-state with its key and elements.
  absl::Status Save(proto::IteratorState* state) final;
  absl::Status Restore(const proto::IteratorState& state) final;

 protected:
  // The element's group; an error is that element's, which is dropped.
  virtual absl::StatusOr<int64_t> KeyOf(const Element& element) const = 0;
  // How many elements fill group `key`; 0 for a key no element gets (a
  // restored state's key must have a size).
  virtual int64_t GroupSize(int64_t key) const = 0;
  // The one element a group (full, or left at the end) becomes.
  virtual absl::StatusOr<Element> Reduce(int64_t key, const std::vector<Element>& group) const = 0;

 private:
  const std::string op_;
  const bool drop_remainder_;
  // Every group here holds from 1 to its size - 1 elements.
  std::map<int64_t, std::vector<Element>> groups_;
  bool input_done_ = false;
};

}  // namespace sluice::internal

#endif  // SLUICE_PIPELINE_GROUPING_UTIL_H_
