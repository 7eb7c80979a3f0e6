// The `cast` element function, documented in docs/pipeline.md.
#include <memory>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"
#include "pipeline/functions/componentwise.h"

namespace sluice {
namespace {

using internal::ComponentwiseFunction;

class CastFunction : public ComponentwiseFunction {
 public:
  CastFunction(ComponentSelector selector, DType dtype)
      : ComponentwiseFunction(std::move(selector)), dtype_(dtype) {}

 protected:
  absl::StatusOr<TensorSpec> TransformSpec(const TensorSpec& input) const override {
    if (!IsNumericDType(input.dtype) || !IsNumericDType(dtype_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cast: cannot cast ", DTypeName(input.dtype), " to ", DTypeName(dtype_)));
    }
    return TensorSpec{input.shape, dtype_};
  }
  absl::StatusOr<Tensor> Transform(const Tensor& input) const override { return CastTensor(input, dtype_); }

 private:
  const DType dtype_;
};

SLUICE_REGISTER_ELEMENT_FUNCTION("cast", "converts to dtype",
                                 [](FunctionArgs& args) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
                                   absl::StatusOr<ComponentSelector> selector =
                                       ComponentSelector::FromArgs(args);
                                   if (!selector.ok()) return selector.status();
                                   absl::StatusOr<DType> dtype = args.GetDType("dtype");
                                   if (!dtype.ok()) return dtype.status();
                                   return std::make_unique<CastFunction>(*std::move(selector), *dtype);
                                 });

}  // namespace
}  // namespace sluice
