// scan: carries a state through the elements, as tf.data's Dataset.scan:
// an element function of (state, element) -> (new state, output), called
// on one element whose first components are the state's and whose rest is
// the input element's, and returning the new state's components first.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/python_function.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

using internal::MakeUnaryIterator;
using internal::UnaryDataset;
using internal::UnaryIterator;

class ScanDataset : public UnaryDataset {
 public:
  ScanDataset(DatasetPtr input, ElementSpec spec, std::unique_ptr<ElementFunction> fn, Element initial_state,
              std::string name)
      : UnaryDataset(std::move(input), std::move(spec), std::move(name)),
        fn_(std::move(fn)),
        initial_state_(std::move(initial_state)),
        state_spec_(ElementSpec::Of(initial_state_)) {}
  int64_t Cardinality() const override { return input()->Cardinality(); }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const ScanDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset), state_(dataset->initial_state_) {}

    // A failed call is that element's error, as map's; the state stays.
    absl::Status GetNext(Element* element, bool* end) override {
      Element in;
      if (absl::Status s = input_->GetNext(&in, end); !s.ok() || *end) return s;
      Element call;
      call.components = state_.components;
      for (Tensor& t : in.components) call.components.push_back(std::move(t));
      absl::StatusOr<Element> out = dataset_->fn_->CallOwned(std::move(call));
      if (!out.ok()) return out.status();
      const size_t state_size = state_.size();
      if (out->size() <= state_size) {
        return absl::InvalidArgumentError(absl::StrCat(dataset_->DebugName(), ": returned ", out->size(),
                                                       " components, not the state's ", state_size,
                                                       " and more"));
      }
      for (size_t i = 0; i < state_size; ++i) {
        if (!IsState(out->components[i], dataset_->state_spec_.components[i])) {
          return absl::InvalidArgumentError(
              absl::StrCat(dataset_->DebugName(), ": the new state's component ", i, " is ",
                           ElementSpec::Of(Element::Of(out->components[i])).DebugString(),
                           ", the initial state's ", dataset_->state_spec_.components[i].DebugString()));
        }
        state_.components[i] = std::move(out->components[i]);
      }
      element->components.assign(std::make_move_iterator(out->components.begin() + state_size),
                                 std::make_move_iterator(out->components.end()));
      element->names = dataset_->names_;
      return absl::OkStatus();
    }

    // The state, as an element, and the input's position.
    absl::Status Save(proto::IteratorState* state) override {
      SaveElement(state_, state);
      return SaveInput(*input_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<Element> saved = RestoreElement(state, 0);
      if (!saved.ok()) return saved.status();
      if (saved->size() != state_.size()) return MalformedState("the scan's state does not match");
      for (size_t i = 0; i < saved->size(); ++i) {
        if (!IsState(saved->components[i], dataset_->state_spec_.components[i])) {
          return MalformedState("the scan's state does not match");
        }
      }
      state_ = *std::move(saved);
      return RestoreInput(*input_, state);
    }

   private:
    static bool IsState(const Tensor& t, const TensorSpec& spec) {
      return t.dtype() == spec.dtype && spec.shape.IsCompatibleWith(t.shape());
    }

    const ScanDataset* const dataset_;
    Element state_;
  };

  const std::unique_ptr<ElementFunction> fn_;
  const Element initial_state_;
  const ElementSpec state_spec_;
  const ComponentNames names_ = MakeNames(element_spec().names);
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeScanDataset(DatasetPtr input, const proto::ScanOp& op) {
  if (op.initial_state().empty()) {
    return absl::InvalidArgumentError("scan: missing 'initial_state', the state's first value");
  }
  Element state;
  for (const proto::TensorProto& t : op.initial_state()) {
    absl::StatusOr<Tensor> tensor = TensorFromProto(t);
    if (!tensor.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("scan: 'initial_state': ", tensor.status().message()));
    }
    state.components.push_back(*std::move(tensor));
  }
  // A Python function takes (state, element) as two arguments: told how
  // many components the state has.
  proto::FunctionDef def = op.fn();
  if (absl::StartsWith(def.name(), kPythonFunctionPrefix)) {
    (*def.mutable_args())[kPythonStateComponents].set_i(static_cast<int64_t>(state.size()));
  }
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = FunctionRegistry::Global().Create(def);
  if (!fn.ok()) return absl::Status(fn.status().code(), absl::StrCat("scan: ", fn.status().message()));
  // The function sees the state's components, then the element's, unnamed.
  ElementSpec call_spec = ElementSpec::Of(state);
  for (const TensorSpec& c : input->element_spec().components) call_spec.components.push_back(c);
  absl::StatusOr<ElementSpec> out = (*fn)->OutputSpec(call_spec);
  if (!out.ok()) return absl::Status(out.status().code(), absl::StrCat("scan: ", out.status().message()));
  const ElementSpec state_spec = ElementSpec::Of(state);
  // No components: a function whose output is known only when it runs (a
  // Python one); each call's new state is checked then.
  if (out->components.empty()) {
    return std::make_shared<ScanDataset>(std::move(input), ElementSpec{}, *std::move(fn), std::move(state),
                                         absl::StrCat("scan(", op.fn().name(), ")"));
  }
  bool keeps_state = out->components.size() > state.size();
  for (size_t i = 0; keeps_state && i < state.size(); ++i) {
    keeps_state = out->components[i].dtype == state_spec.components[i].dtype;
  }
  if (!keeps_state) {
    return absl::InvalidArgumentError(absl::StrCat("scan: '", op.fn().name(), "' returns ",
                                                   out->DebugString(), ", which must start with the state, ",
                                                   state_spec.DebugString(), ", and then an element"));
  }
  ElementSpec spec;
  spec.components.assign(out->components.begin() + static_cast<int64_t>(state.size()), out->components.end());
  if (!out->names.empty()) {
    spec.names.assign(out->names.begin() + static_cast<int64_t>(state.size()), out->names.end());
  }
  return std::make_shared<ScanDataset>(std::move(input), std::move(spec), *std::move(fn), std::move(state),
                                       absl::StrCat("scan(", op.fn().name(), ")"));
}

}  // namespace sluice
