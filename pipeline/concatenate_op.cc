// concatenate: the input's elements, then another dataset's, as tf.data's
// Dataset.concatenate; and the spec rule that it and the dataset-mixing ops
// share (CommonElementSpec).
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

class ConcatenateDataset : public internal::UnaryDataset {
 public:
  ConcatenateDataset(DatasetPtr input, DatasetPtr other, ElementSpec spec)
      : UnaryDataset(std::move(input), std::move(spec), "concatenate"), other_(std::move(other)) {}

  // tf.data's rule: infinite if either is, unknown if either is, else the sum.
  int64_t Cardinality() const override {
    const int64_t a = input()->Cardinality();
    const int64_t b = other_->Cardinality();
    if (a == kInfiniteCardinality || b == kInfiniteCardinality) return kInfiniteCardinality;
    if (a == kUnknownCardinality || b == kUnknownCardinality) return kUnknownCardinality;
    return a + b;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    absl::StatusOr<std::unique_ptr<IteratorBase>> first = input()->MakeIterator(context);
    if (!first.ok()) return first.status();
    // The other dataset reads whole: splits belong to the input's source.
    absl::StatusOr<std::unique_ptr<IteratorBase>> other = other_->MakeIterator(IteratorContext{});
    if (!other.ok()) return other.status();
    return std::make_unique<Iterator>(this, *std::move(first), *std::move(other));
  }

 private:
  // Reads the input to its end, then the other dataset. Both iterators are
  // made at once (tf.data makes the second when the first ends): a later
  // one would take a later place in what its dataset counts, the epoch of
  // a reshuffling shuffle in it, and a restore could not tell which.
  class Iterator : public internal::UnaryIterator {
   public:
    Iterator(const ConcatenateDataset* dataset, std::unique_ptr<IteratorBase> input,
             std::unique_ptr<IteratorBase> other)
        : UnaryIterator(std::move(input)),
          names_(MakeNames(dataset->element_spec().names)),
          other_(std::move(other)) {}

    absl::Status GetNext(Element* element, bool* end) override {
      if (!input_done_) {
        if (absl::Status s = input_->GetNext(element, end); !s.ok() || !*end) return s;
        input_done_ = true;
      }
      if (absl::Status s = other_->GetNext(element, end); !s.ok() || *end) return s;
      // The other dataset's names may be an equal list of its own.
      element->names = names_;
      return absl::OkStatus();
    }

    absl::Status Save(proto::IteratorState* state) override {
      (*state->mutable_ints())["input_done"] = input_done_ ? 1 : 0;
      if (absl::Status s = SaveInput(*input_, state); !s.ok()) return s;
      return SaveInput(*other_, state);
    }

    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<int64_t> input_done = StateInt(state, "input_done");
      if (!input_done.ok()) return input_done.status();
      if (state.inputs_size() != 2) return MalformedState("the concatenate's inputs do not match");
      input_done_ = *input_done != 0;
      if (absl::Status s = RestoreInput(*input_, state, 0); !s.ok()) return s;
      return RestoreInput(*other_, state, 1);
    }

   private:
    const ComponentNames names_;
    std::unique_ptr<IteratorBase> other_;
    bool input_done_ = false;
  };

  const DatasetPtr other_;
};

}  // namespace

absl::StatusOr<ElementSpec> CommonElementSpec(const ElementSpec& a, const ElementSpec& b, const char* op) {
  bool compatible = a.components.size() == b.components.size() && a.names == b.names;
  ElementSpec common = a;
  for (size_t i = 0; compatible && i < a.components.size(); ++i) {
    compatible = a.components[i].dtype == b.components[i].dtype;
    common.components[i].shape = a.components[i].shape.MostSpecificCommon(b.components[i].shape);
  }
  if (compatible) return common;
  return absl::InvalidArgumentError(absl::StrCat(op, ": incompatible element specs ", a.DebugString(),
                                                 " and ", b.DebugString(),
                                                 " (components must match in number, names and dtype)"));
}

absl::StatusOr<DatasetPtr> MakeConcatenateDataset(DatasetPtr input, DatasetPtr other) {
  absl::StatusOr<ElementSpec> spec =
      CommonElementSpec(input->element_spec(), other->element_spec(), "concatenate");
  if (!spec.ok()) return spec.status();
  return std::make_shared<ConcatenateDataset>(std::move(input), std::move(other), *std::move(spec));
}

}  // namespace sluice
