// The base of the element functions that transform each selected component
// on its own (arithmetic, cast, decode_raw): it resolves the `component`
// argument and leaves the components not chosen as they are. Shared by the
// families in pipeline/functions/; not for plugins.
#ifndef SLUICE_PIPELINE_FUNCTIONS_COMPONENTWISE_H_
#define SLUICE_PIPELINE_FUNCTIONS_COMPONENTWISE_H_

#include <utility>

#include "absl/status/statusor.h"
#include "pipeline/function.h"

namespace sluice::internal {

// Applies a per-tensor transformation to the selected components and leaves
// the others as they are.
class ComponentwiseFunction : public ElementFunction {
 public:
  explicit ComponentwiseFunction(ComponentSelector selector) : selector_(std::move(selector)) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override;
  absl::StatusOr<Element> Call(const Element& input) const override;
  absl::StatusOr<Element> CallOwned(Element input) const override;

  bool IsElementwise() const override { return true; }

 protected:
  virtual absl::StatusOr<TensorSpec> TransformSpec(const TensorSpec& input) const = 0;
  virtual absl::StatusOr<Tensor> Transform(const Tensor& input) const = 0;
  // Transform of a tensor the caller gives up; may write into its buffer.
  virtual absl::StatusOr<Tensor> TransformOwned(Tensor input) const { return Transform(input); }

 private:
  ComponentSelector selector_;
};

}  // namespace sluice::internal

#endif  // SLUICE_PIPELINE_FUNCTIONS_COMPONENTWISE_H_
