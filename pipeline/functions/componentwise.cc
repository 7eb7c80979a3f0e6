#include "pipeline/functions/componentwise.h"

#include <string>
#include <vector>

namespace sluice::internal {

absl::StatusOr<ElementSpec> ComponentwiseFunction::OutputSpec(const ElementSpec& input) const {
  absl::StatusOr<std::vector<int>> selected = selector_.Resolve(input.components.size(), input.names);
  if (!selected.ok()) return selected.status();
  ElementSpec output = input;
  for (int i : *selected) {
    absl::StatusOr<TensorSpec> spec = TransformSpec(input.components[i]);
    if (!spec.ok()) return spec.status();
    output.components[i] = *spec;
  }
  return output;
}

absl::StatusOr<Element> ComponentwiseFunction::Call(const Element& input) const {
  static const std::vector<std::string> kNoNames;
  absl::StatusOr<std::vector<int>> selected =
      selector_.Resolve(input.size(), input.named() ? *input.names : kNoNames);
  if (!selected.ok()) return selected.status();
  Element output = input;
  for (int i : *selected) {
    absl::StatusOr<Tensor> tensor = Transform(input.components[i]);
    if (!tensor.ok()) return tensor.status();
    output.components[i] = *std::move(tensor);
  }
  return output;
}

absl::StatusOr<Element> ComponentwiseFunction::CallOwned(Element input) const {
  if (selector_.all()) {  // the common case, without a selection vector
    for (Tensor& component : input.components) {
      absl::StatusOr<Tensor> tensor = TransformOwned(std::move(component));
      if (!tensor.ok()) return tensor.status();
      component = *std::move(tensor);
    }
    return input;
  }
  static const std::vector<std::string> kNoNames;
  absl::StatusOr<std::vector<int>> selected =
      selector_.Resolve(input.size(), input.named() ? *input.names : kNoNames);
  if (!selected.ok()) return selected.status();
  for (int i : *selected) {
    absl::StatusOr<Tensor> tensor = TransformOwned(std::move(input.components[i]));
    if (!tensor.ok()) return tensor.status();
    input.components[i] = *std::move(tensor);
  }
  return input;
}

}  // namespace sluice::internal
