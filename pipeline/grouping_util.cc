#include "pipeline/grouping_util.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "pipeline/iterator_state.h"

namespace sluice::internal {
namespace {

bool IsIntegerScalar(const TensorSpec& spec) {
  return (spec.dtype == DType::kInt32 || spec.dtype == DType::kInt64) &&
         (spec.shape.unknown_rank || spec.shape.dims.empty());
}

}  // namespace

absl::StatusOr<IntegerFunction> IntegerFunction::Create(const proto::FunctionDef& def,
                                                        const ElementSpec& input, const std::string& op,
                                                        const std::string& arg) {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = FunctionRegistry::Global().Create(def);
  if (!fn.ok())
    return absl::Status(fn.status().code(), absl::StrCat(op, ": ", arg, ": ", fn.status().message()));
  absl::StatusOr<ElementSpec> out = (*fn)->OutputSpec(input);
  if (!out.ok())
    return absl::Status(out.status().code(), absl::StrCat(op, ": ", arg, ": ", out.status().message()));
  std::string where = absl::StrCat(op, ": ", arg, " '", def.name(), "'");
  if (out->components.size() != 1 || !IsIntegerScalar(out->components[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " returns ", out->DebugString(), ", not one int32 or int64 scalar"));
  }
  return IntegerFunction(*std::move(fn), std::move(where));
}

absl::StatusOr<int64_t> IntegerFunction::operator()(const Element& element) const {
  absl::StatusOr<Element> out = fn_->Call(element);
  if (!out.ok()) return out.status();
  // The spec was checked at build time; an unknown rank is checked here.
  if (out->size() != 1 || !IsIntegerScalar(ElementSpec::Of(*out).components[0])) {
    return absl::InvalidArgumentError(absl::StrCat(where_, " returned ", ElementSpec::Of(*out).DebugString(),
                                                   ", not one int32 or int64 scalar"));
  }
  const Tensor& value = out->components[0];
  return value.dtype() == DType::kInt32 ? int64_t{value.data<int32_t>()[0]} : value.data<int64_t>()[0];
}

absl::Status AsOpError(const absl::Status& status, const std::string& op) {
  if (status.ok()) return status;
  absl::string_view message = status.message();
  if (!absl::ConsumePrefix(&message, "padded_batch: ")) absl::ConsumePrefix(&message, "batch: ");
  return absl::Status(status.code(), absl::StrCat(op, ": ", message));
}

absl::Status GroupingIterator::GetNext(Element* element, bool* end) {
  std::vector<Element> group;
  int64_t key = 0;
  while (!input_done_ && group.empty()) {
    Element next;
    bool input_end = false;
    if (absl::Status s = input_->GetNext(&next, &input_end); !s.ok()) return s;
    if (input_end) {
      input_done_ = true;
      break;
    }
    absl::StatusOr<int64_t> next_key = KeyOf(next);
    if (!next_key.ok()) return next_key.status();
    auto it = groups_.try_emplace(*next_key).first;
    it->second.push_back(std::move(next));
    if (static_cast<int64_t>(it->second.size()) >= GroupSize(*next_key)) {
      key = *next_key;
      group = std::move(it->second);
      groups_.erase(it);
    }
  }
  if (group.empty() && drop_remainder_) groups_.clear();
  if (group.empty() && !groups_.empty()) {
    key = groups_.begin()->first;
    group = std::move(groups_.begin()->second);
    groups_.erase(groups_.begin());
  }
  if (group.empty()) {
    *end = true;
    return absl::OkStatus();
  }
  absl::StatusOr<Element> reduced = Reduce(key, group);
  if (!reduced.ok()) return reduced.status();
  *element = *std::move(reduced);
  *end = false;
  return absl::OkStatus();
}

absl::Status GroupingIterator::Save(proto::IteratorState* state) {
  (*state->mutable_ints())["input_done"] = input_done_ ? 1 : 0;
  if (absl::Status s = SaveInput(*input_, state); !s.ok()) return s;
  for (const auto& [key, elements] : groups_) {
    proto::IteratorState* group = state->add_inputs();
    (*group->mutable_ints())["key"] = key;
    for (const Element& e : elements) SaveElement(e, group);
  }
  return absl::OkStatus();
}

absl::Status GroupingIterator::Restore(const proto::IteratorState& state) {
  absl::StatusOr<int64_t> input_done = StateInt(state, "input_done");
  if (!input_done.ok()) return input_done.status();
  std::map<int64_t, std::vector<Element>> groups;
  for (int i = 1; i < state.inputs_size(); ++i) {
    absl::StatusOr<int64_t> key = StateInt(state.inputs(i), "key");
    if (!key.ok()) return key.status();
    absl::StatusOr<std::vector<Element>> elements = RestoreElements(state.inputs(i));
    if (!elements.ok()) return elements.status();
    const int64_t size = GroupSize(*key);
    const int64_t held = static_cast<int64_t>(elements->size());
    if (size <= 0) return MalformedState(absl::StrCat(op_, " has no group ", *key));
    if (held == 0 || held >= size) {
      return MalformedState(
          absl::StrCat(op_, "'s group ", *key, " holds ", held, " elements, not 1 to ", size - 1));
    }
    if (!groups.try_emplace(*key, *std::move(elements)).second) {
      return MalformedState(absl::StrCat(op_, "'s group ", *key, " is saved twice"));
    }
  }
  if (absl::Status s = RestoreInput(*input_, state); !s.ok()) return s;
  groups_ = std::move(groups);
  input_done_ = *input_done != 0;
  return absl::OkStatus();
}

}  // namespace sluice::internal
