// The arithmetic element functions: add, subtract, multiply, floordiv, mod,
// square and negate. Each is documented in docs/pipeline.md.
#include <cmath>
#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"
#include "pipeline/functions/componentwise.h"

namespace sluice {
namespace {

using internal::ComponentwiseFunction;

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

enum class Arithmetic { kAdd, kSubtract, kMultiply, kFloorDiv, kMod, kSquare, kNegate };

const char* ArithmeticName(Arithmetic op) {
  switch (op) {
    case Arithmetic::kAdd:
      return "add";
    case Arithmetic::kSubtract:
      return "subtract";
    case Arithmetic::kMultiply:
      return "multiply";
    case Arithmetic::kFloorDiv:
      return "floordiv";
    case Arithmetic::kMod:
      return "mod";
    case Arithmetic::kSquare:
      return "square";
    case Arithmetic::kNegate:
      return "negate";
  }
  return "?";
}

// Integer arithmetic wraps on overflow (through the unsigned type), as
// tf's does, instead of being undefined behaviour.
template <typename T>
T IntegerArithmetic(Arithmetic op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case Arithmetic::kAdd:
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case Arithmetic::kSubtract:
      return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    case Arithmetic::kMultiply:
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case Arithmetic::kSquare:
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(a));
    case Arithmetic::kNegate:
      return static_cast<T>(U{0} - static_cast<U>(a));
    case Arithmetic::kFloorDiv: {
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return static_cast<T>(U{0} - static_cast<U>(a));  // avoids MIN / -1
        T q = static_cast<T>(a / b);
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return q;
      } else {
        return static_cast<T>(a / b);
      }
    }
    case Arithmetic::kMod: {
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;
        T r = static_cast<T>(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
        return r;
      } else {
        return static_cast<T>(a % b);
      }
    }
  }
  return a;
}

template <typename T>
T FloatArithmetic(Arithmetic op, T a, T b) {
  switch (op) {
    case Arithmetic::kAdd:
      return a + b;
    case Arithmetic::kSubtract:
      return a - b;
    case Arithmetic::kMultiply:
      return a * b;
    case Arithmetic::kSquare:
      return a * a;
    case Arithmetic::kNegate:
      return -a;
    case Arithmetic::kFloorDiv:
      return std::floor(a / b);
    case Arithmetic::kMod: {
      T r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
  return a;
}

template <Arithmetic kOp, typename T>
T Compute(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return FloatArithmetic(kOp, a, b);
  } else {
    return IntegerArithmetic(kOp, a, b);
  }
}

// One loop per op, so the op's switch is resolved outside the loop and the
// compiler can vectorize the body.
template <Arithmetic kOp, typename T>
void Kernel(const T* in, T* out, int64_t n, T b) {
  for (int64_t i = 0; i < n; ++i) out[i] = Compute<kOp>(in[i], b);
}

template <typename T>
void RunKernel(Arithmetic op, const T* in, T* out, int64_t n, T b) {
  switch (op) {
    case Arithmetic::kAdd:
      return Kernel<Arithmetic::kAdd>(in, out, n, b);
    case Arithmetic::kSubtract:
      return Kernel<Arithmetic::kSubtract>(in, out, n, b);
    case Arithmetic::kMultiply:
      return Kernel<Arithmetic::kMultiply>(in, out, n, b);
    case Arithmetic::kFloorDiv:
      return Kernel<Arithmetic::kFloorDiv>(in, out, n, b);
    case Arithmetic::kMod:
      return Kernel<Arithmetic::kMod>(in, out, n, b);
    case Arithmetic::kSquare:
      return Kernel<Arithmetic::kSquare>(in, out, n, b);
    case Arithmetic::kNegate:
      return Kernel<Arithmetic::kNegate>(in, out, n, b);
  }
}

// add, subtract, multiply, floordiv, mod (with `value`), square, negate.
class ArithmeticFunction : public ComponentwiseFunction {
 public:
  ArithmeticFunction(ComponentSelector selector, Arithmetic op, bool value_is_integer, int64_t int_value,
                     double float_value)
      : ComponentwiseFunction(std::move(selector)),
        op_(op),
        value_is_integer_(value_is_integer),
        int_value_(int_value),
        float_value_(float_value) {}

  static absl::StatusOr<std::unique_ptr<ElementFunction>> Make(FunctionArgs& args, Arithmetic op) {
    absl::StatusOr<ComponentSelector> selector = ComponentSelector::FromArgs(args);
    if (!selector.ok()) return selector.status();
    bool is_integer = true;
    int64_t int_value = 0;
    double float_value = 0;
    if (op != Arithmetic::kSquare && op != Arithmetic::kNegate) {
      const proto::AttrValue* value = args.Get("value");
      if (value == nullptr) return args.MissingRequired("value");
      if (value->value_case() == proto::AttrValue::kI) {
        int_value = value->i();
        float_value = static_cast<double>(int_value);
      } else if (value->value_case() == proto::AttrValue::kF) {
        is_integer = false;
        float_value = value->f();
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(ArithmeticName(op), ": argument 'value' must be a number"));
      }
      if ((op == Arithmetic::kFloorDiv || op == Arithmetic::kMod) && is_integer && int_value == 0) {
        return absl::InvalidArgumentError(absl::StrCat(ArithmeticName(op), ": division by zero"));
      }
    }
    return std::make_unique<ArithmeticFunction>(*std::move(selector), op, is_integer, int_value, float_value);
  }

 protected:
  absl::StatusOr<TensorSpec> TransformSpec(const TensorSpec& input) const override {
    if (!IsIntegerDType(input.dtype) && !IsFloatingDType(input.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(ArithmeticName(op_), ": needs a numeric component, got ", DTypeName(input.dtype)));
    }
    if (IsIntegerDType(input.dtype) && !value_is_integer_) {
      return absl::InvalidArgumentError(absl::StrCat(ArithmeticName(op_), ": value ", float_value_,
                                                     " is not an integer but the component is ",
                                                     DTypeName(input.dtype)));
    }
    return input;
  }

  absl::StatusOr<Tensor> Transform(const Tensor& input) const override {
    Tensor output = Tensor::Uninitialized(input.dtype(), input.shape());
    if (absl::Status status = Apply(input, &output); !status.ok()) return status;
    return output;
  }

  // In place when no one else holds the buffer.
  absl::StatusOr<Tensor> TransformOwned(Tensor input) const override {
    if (input.buffer().use_count() != 1) return Transform(input);
    if (absl::Status status = Apply(input, &input); !status.ok()) return status;
    return input;
  }

 private:
  // out[i] = op(in[i], value); `out` may be `in`.
  absl::Status Apply(const Tensor& input, Tensor* output) const {
    // Only the dtype matters to TransformSpec; an unknown-rank spec avoids
    // copying the shape on this per-call path.
    if (absl::StatusOr<TensorSpec> check = TransformSpec({PartialShape::UnknownRank(), input.dtype()});
        !check.ok()) {
      return check.status();
    }
    VisitNumericDType(input.dtype(), [&]<typename T>() {
      const T* in = input.data<T>();
      T* out = output->mutable_data<T>();
      const int64_t n = input.num_elements();
      if constexpr (kIsHalf<T>) {
        const float b = static_cast<float>(float_value_);
        for (int64_t i = 0; i < n; ++i) out[i] = T(FloatArithmetic(op_, static_cast<float>(in[i]), b));
      } else if constexpr (!std::is_same_v<T, bool>) {
        const T b = std::is_floating_point_v<T> ? static_cast<T>(float_value_) : static_cast<T>(int_value_);
        RunKernel(op_, in, out, n, b);
      }
    });
    return absl::OkStatus();
  }

  const Arithmetic op_;
  const bool value_is_integer_;
  const int64_t int_value_;
  const double float_value_;
};

FunctionFactory ArithmeticFactory(Arithmetic op) {
  return [op](FunctionArgs& args) { return ArithmeticFunction::Make(args, op); };
}

SLUICE_REGISTER_ELEMENT_FUNCTION("add", "x + value", ArithmeticFactory(Arithmetic::kAdd));
SLUICE_REGISTER_ELEMENT_FUNCTION("subtract", "x - value", ArithmeticFactory(Arithmetic::kSubtract));
SLUICE_REGISTER_ELEMENT_FUNCTION("multiply", "x * value", ArithmeticFactory(Arithmetic::kMultiply));
SLUICE_REGISTER_ELEMENT_FUNCTION("floordiv", "floor(x / value)", ArithmeticFactory(Arithmetic::kFloorDiv));
SLUICE_REGISTER_ELEMENT_FUNCTION("mod", "x mod value, with the sign of value",
                                 ArithmeticFactory(Arithmetic::kMod));
SLUICE_REGISTER_ELEMENT_FUNCTION("square", "x * x", ArithmeticFactory(Arithmetic::kSquare));
SLUICE_REGISTER_ELEMENT_FUNCTION("negate", "-x", ArithmeticFactory(Arithmetic::kNegate));

}  // namespace
}  // namespace sluice
