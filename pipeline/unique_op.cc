// unique: drops the elements seen before, as tf.data's Dataset.unique, for
// elements of one scalar int32, int64 or string component. The set of
// values seen grows with the distinct values, and a checkpoint records it.
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

using internal::MakeUnaryIterator;
using internal::UnaryDataset;
using internal::UnaryIterator;

class UniqueDataset : public UnaryDataset {
 public:
  explicit UniqueDataset(DatasetPtr input) : UnaryDataset(input, input->element_spec(), "unique") {}
  // As tf.data: infinite stays infinite (though the values may run out,
  // and then a read waits forever), anything else is unknown.
  int64_t Cardinality() const override {
    return internal::CardinalityOfValueDependentStep(input()->Cardinality());
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const UniqueDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)),
          is_string_(dataset->element_spec().components[0].dtype == DType::kString) {}

    absl::Status GetNext(Element* element, bool* end) override {
      while (true) {
        if (absl::Status s = input_->GetNext(element, end); !s.ok() || *end) return s;
        const Tensor& t = element->components[0];
        if (t.num_elements() != 1) {
          return absl::InvalidArgumentError(absl::StrCat("unique: an element of shape ",
                                                         PartialShape::Known(t.shape()).DebugString(),
                                                         " where the spec says a scalar"));
        }
        const bool fresh = is_string_ ? strings_.insert(t.values<std::string>()[0]).second
                                      : ints_.insert(IntValue(t)).second;
        if (fresh) return absl::OkStatus();
      }
    }

    // The values seen, as one vector element, then the input's state.
    absl::Status Save(proto::IteratorState* state) override {
      if (is_string_) {
        SaveElement(Element::Of(Tensor::FromVector<std::string>({strings_.begin(), strings_.end()})), state);
      } else {
        SaveElement(Element::Of(Tensor::FromVector<int64_t>({ints_.begin(), ints_.end()})), state);
      }
      return SaveInput(*input_, state);
    }

    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<Element> seen = RestoreElement(state, 0);
      if (!seen.ok()) return seen.status();
      const DType want = is_string_ ? DType::kString : DType::kInt64;
      if (seen->size() != 1 || seen->components[0].dtype() != want || seen->components[0].rank() != 1) {
        return MalformedState("unique's seen values are not a vector of the element's type");
      }
      if (is_string_) {
        for (const std::string& v : seen->components[0].values<std::string>()) strings_.insert(v);
      } else {
        for (int64_t v : seen->components[0].values<int64_t>()) ints_.insert(v);
      }
      return RestoreInput(*input_, state);
    }

   private:
    static int64_t IntValue(const Tensor& t) {
      return t.dtype() == DType::kInt32 ? int64_t{t.data<int32_t>()[0]} : t.data<int64_t>()[0];
    }

    const bool is_string_;
    std::unordered_set<int64_t> ints_;
    std::unordered_set<std::string> strings_;
  };
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeUniqueDataset(DatasetPtr input) {
  const ElementSpec& spec = input->element_spec();
  const bool supported =
      spec.components.size() == 1 && !spec.components[0].shape.unknown_rank &&
      spec.components[0].shape.dims.empty() &&
      (spec.components[0].dtype == DType::kInt32 || spec.components[0].dtype == DType::kInt64 ||
       spec.components[0].dtype == DType::kString);
  if (!supported) {
    return absl::InvalidArgumentError(
        absl::StrCat("unique: elements must be one scalar int32, int64 or string component (as tf.data's); "
                     "they are ",
                     spec.DebugString()));
  }
  return std::make_shared<UniqueDataset>(std::move(input));
}

}  // namespace sluice
