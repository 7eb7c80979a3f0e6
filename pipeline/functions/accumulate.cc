// The `accumulate` element function, documented in docs/pipeline.md: a
// running sum for `scan`, (state, x) -> (state + x, state + x), as
// tf.data's scan example.
#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"

namespace sluice {
namespace {

// Integers wrap on overflow (through the unsigned type), as `add` does.
template <typename T>
Tensor Sum(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::Uninitialized(a.dtype(), a.shape());
  const T* x = a.data<T>();
  const T* y = b.data<T>();
  T* z = out.mutable_data<T>();
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      z[i] = static_cast<T>(static_cast<U>(x[i]) + static_cast<U>(y[i]));
    } else {
      z[i] = x[i] + y[i];
    }
  }
  return out;
}

class AccumulateFunction : public ElementFunction {
 public:
  static absl::StatusOr<std::unique_ptr<ElementFunction>> Make(FunctionArgs&) {
    return std::make_unique<AccumulateFunction>();
  }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    const bool numeric =
        input.components.size() == 2 && input.components[0].dtype == input.components[1].dtype &&
        (input.components[0].dtype == DType::kInt32 || input.components[0].dtype == DType::kInt64 ||
         input.components[0].dtype == DType::kFloat32 || input.components[0].dtype == DType::kFloat64);
    if (!numeric) {
      return absl::InvalidArgumentError(absl::StrCat(
          "accumulate: takes (state, element) of one int32, int64, float32 or float64 dtype; got ",
          input.DebugString()));
    }
    ElementSpec output;
    const PartialShape shape = input.components[0].shape.MostSpecificCommon(input.components[1].shape);
    output.components = {{shape, input.components[0].dtype}, {shape, input.components[0].dtype}};
    return output;
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    const Tensor& state = input.components[0];
    const Tensor& x = input.components[1];
    if (state.shape() != x.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("accumulate: the state's shape ", PartialShape::Known(state.shape()).DebugString(),
                       " differs from the element's ", PartialShape::Known(x.shape()).DebugString()));
    }
    Tensor sum;
    switch (state.dtype()) {
      case DType::kInt32:
        sum = Sum<int32_t>(state, x);
        break;
      case DType::kInt64:
        sum = Sum<int64_t>(state, x);
        break;
      case DType::kFloat32:
        sum = Sum<float>(state, x);
        break;
      default:
        sum = Sum<double>(state, x);
    }
    Element output;
    output.components = {sum, sum};  // the new state and the output share the buffer
    return output;
  }
};

SLUICE_REGISTER_ELEMENT_FUNCTION("accumulate", "(state, x) -> (state + x, state + x): a running sum for scan",
                                 AccumulateFunction::Make);

}  // namespace
}  // namespace sluice
