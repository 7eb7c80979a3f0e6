// The built-in element functions. Each is documented in docs/pipeline.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"
#include "sluice/example.pb.h"

namespace sluice {
namespace {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Applies a per-tensor transformation to the selected components and leaves
// the others as they are.
class ComponentwiseFunction : public ElementFunction {
 public:
  explicit ComponentwiseFunction(ComponentSelector selector) : selector_(std::move(selector)) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
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

  absl::StatusOr<Element> Call(const Element& input) const override {
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

  absl::StatusOr<Element> CallOwned(Element input) const override {
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

  bool IsElementwise() const override { return true; }

 protected:
  virtual absl::StatusOr<TensorSpec> TransformSpec(const TensorSpec& input) const = 0;
  virtual absl::StatusOr<Tensor> Transform(const Tensor& input) const = 0;
  // Transform of a tensor the caller gives up; may write into its buffer.
  virtual absl::StatusOr<Tensor> TransformOwned(Tensor input) const { return Transform(input); }

 private:
  ComponentSelector selector_;
};

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
      if (value == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(ArithmeticName(op), ": missing required argument 'value'"));
      }
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

enum class Comparison { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual };

template <typename T>
bool Compare(Comparison op, const T& a, const T& b) {
  switch (op) {
    case Comparison::kLess:
      return a < b;
    case Comparison::kLessEqual:
      return a <= b;
    case Comparison::kGreater:
      return a > b;
    case Comparison::kGreaterEqual:
      return a >= b;
    case Comparison::kEqual:
      return a == b;
    case Comparison::kNotEqual:
      return a != b;
  }
  return false;
}

// less, less_equal, greater, greater_equal, equal, not_equal: one component
// against `value`, giving a bool tensor of that component's shape.
class PredicateFunction : public ElementFunction {
 public:
  PredicateFunction(std::string name, ComponentSelector selector, Comparison op, proto::AttrValue value)
      : name_(std::move(name)), selector_(std::move(selector)), op_(op), value_(std::move(value)) {}

  static absl::StatusOr<std::unique_ptr<ElementFunction>> Make(FunctionArgs& args, Comparison op) {
    absl::StatusOr<ComponentSelector> selector = ComponentSelector::FromArgs(args);
    if (!selector.ok()) return selector.status();
    const proto::AttrValue* value = args.Get("value");
    if (value == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.function_name(), ": missing required argument 'value'"));
    }
    if (value->value_case() != proto::AttrValue::kI && value->value_case() != proto::AttrValue::kF &&
        value->value_case() != proto::AttrValue::kS && value->value_case() != proto::AttrValue::kB) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.function_name(), ": argument 'value' must be a number, bool or string"));
    }
    return std::make_unique<PredicateFunction>(args.function_name(), *std::move(selector), op, *value);
  }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    absl::StatusOr<int> index = Component(input.components.size(), input.names);
    if (!index.ok()) return index.status();
    const DType dtype = input.components[*index].dtype;
    const bool string_value = value_.value_case() == proto::AttrValue::kS;
    if ((dtype == DType::kString) != string_value) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": cannot compare a ", DTypeName(dtype),
                                                     " component with ",
                                                     string_value ? "a string" : "a number"));
    }
    ElementSpec output;
    output.components.push_back({input.components[*index].shape, DType::kBool});
    return output;
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    static const std::vector<std::string> kNoNames;
    absl::StatusOr<int> index = Component(input.size(), input.named() ? *input.names : kNoNames);
    if (!index.ok()) return index.status();
    const Tensor& in = input.components[*index];
    Tensor out(DType::kBool, in.shape());
    bool* result = out.mutable_data<bool>();
    const int64_t n = in.num_elements();
    if (in.dtype() == DType::kString) {
      if (value_.value_case() != proto::AttrValue::kS) {
        return absl::InvalidArgumentError(absl::StrCat(name_, ": cannot compare a string with a number"));
      }
      for (int64_t i = 0; i < n; ++i) result[i] = Compare(op_, in.data<std::string>()[i], value_.s());
    } else if (IsFloatingDType(in.dtype()) || value_.value_case() == proto::AttrValue::kF) {
      const double b = value_.value_case() == proto::AttrValue::kF   ? value_.f()
                       : value_.value_case() == proto::AttrValue::kB ? (value_.b() ? 1.0 : 0.0)
                                                                     : static_cast<double>(value_.i());
      for (int64_t i = 0; i < n; ++i) result[i] = Compare(op_, NumericValueAsDouble(in, i), b);
    } else if (in.dtype() == DType::kUInt64) {
      // Compared as unsigned, so that values past INT64_MAX stay in order.
      const int64_t b = value_.value_case() == proto::AttrValue::kB ? value_.b() : value_.i();
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t a = in.data<uint64_t>()[i];
        result[i] = b < 0 ? Compare<int>(op_, 1, 0) : Compare(op_, a, static_cast<uint64_t>(b));
      }
    } else {
      const int64_t b = value_.value_case() == proto::AttrValue::kB ? value_.b() : value_.i();
      for (int64_t i = 0; i < n; ++i) result[i] = Compare(op_, NumericValueAsInt64(in, i), b);
    }
    return Element::Of(std::move(out));
  }

 private:
  absl::StatusOr<int> Component(size_t num_components, const std::vector<std::string>& names) const {
    absl::StatusOr<std::vector<int>> selected = selector_.Resolve(num_components, names);
    if (!selected.ok()) return selected.status();
    if (selected->size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": the element has ", num_components,
                       " components; pick the one to compare with the 'component' argument"));
    }
    return selected->front();
  }

  const std::string name_;
  const ComponentSelector selector_;
  const Comparison op_;
  const proto::AttrValue value_;
};

// select: keeps the listed components (indices or names), in that order.
class SelectFunction : public ElementFunction {
 public:
  explicit SelectFunction(std::vector<proto::AttrValue> picks) : picks_(std::move(picks)) {}

  static absl::StatusOr<std::unique_ptr<ElementFunction>> Make(FunctionArgs& args) {
    const proto::AttrValue* value = args.Get("components");
    if (value == nullptr) {
      return absl::InvalidArgumentError("select: missing required argument 'components'");
    }
    std::vector<proto::AttrValue> picks;
    if (value->value_case() == proto::AttrValue::kList) {
      picks.assign(value->list().values().begin(), value->list().values().end());
    } else {
      picks.push_back(*value);
    }
    for (const proto::AttrValue& pick : picks) {
      if (pick.value_case() != proto::AttrValue::kI && pick.value_case() != proto::AttrValue::kS) {
        return absl::InvalidArgumentError("select: each of 'components' must be an index or a name");
      }
    }
    if (picks.empty()) return absl::InvalidArgumentError("select: 'components' is empty");
    return std::make_unique<SelectFunction>(std::move(picks));
  }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    absl::StatusOr<std::vector<int>> indices = Indices(input.components.size(), input.names);
    if (!indices.ok()) return indices.status();
    ElementSpec output;
    for (int i : *indices) {
      output.components.push_back(input.components[i]);
      if (!input.names.empty()) output.names.push_back(input.names[i]);
    }
    return output;
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    static const std::vector<std::string> kNoNames;
    const std::vector<std::string>& names = input.named() ? *input.names : kNoNames;
    absl::StatusOr<std::vector<int>> indices = Indices(input.size(), names);
    if (!indices.ok()) return indices.status();
    Element output;
    std::vector<std::string> output_names;
    for (int i : *indices) {
      output.components.push_back(input.components[i]);
      if (input.named()) output_names.push_back(names[i]);
    }
    output.names = MakeNames(std::move(output_names));
    return output;
  }

 private:
  absl::StatusOr<std::vector<int>> Indices(size_t num_components,
                                           const std::vector<std::string>& names) const {
    std::vector<int> indices;
    for (const proto::AttrValue& pick : picks_) {
      if (pick.value_case() == proto::AttrValue::kI) {
        if (pick.i() < 0 || pick.i() >= static_cast<int64_t>(num_components)) {
          return absl::InvalidArgumentError(absl::StrCat("select: component ", pick.i(),
                                                         " is out of range for an element of ",
                                                         num_components, " components"));
        }
        indices.push_back(static_cast<int>(pick.i()));
      } else {
        auto it = std::find(names.begin(), names.end(), pick.s());
        if (it == names.end()) {
          return absl::InvalidArgumentError(absl::StrCat("select: no component named '", pick.s(), "'"));
        }
        indices.push_back(static_cast<int>(it - names.begin()));
      }
    }
    return indices;
  }

  const std::vector<proto::AttrValue> picks_;
};

// decode_raw: each string's bytes reinterpreted as a vector of `dtype`.
class DecodeRawFunction : public ComponentwiseFunction {
 public:
  DecodeRawFunction(ComponentSelector selector, DType dtype, bool little_endian)
      : ComponentwiseFunction(std::move(selector)), dtype_(dtype), little_endian_(little_endian) {}

  // Rows of one batch may have different lengths; only separate rows may.
  bool IsElementwise() const override { return false; }

 protected:
  absl::StatusOr<TensorSpec> TransformSpec(const TensorSpec& input) const override {
    if (input.dtype != DType::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat("decode_raw: needs a string component, got ", DTypeName(input.dtype)));
    }
    PartialShape shape = input.shape;
    if (!shape.unknown_rank) shape.dims.push_back(kUnknownDim);
    return TensorSpec{shape, dtype_};
  }

  absl::StatusOr<Tensor> Transform(const Tensor& input) const override {
    if (input.dtype() != DType::kString) {
      return absl::InvalidArgumentError("decode_raw: needs a string component");
    }
    const size_t width = DTypeSize(dtype_);
    const auto strings = input.values<std::string>();
    const size_t length = strings.empty() ? 0 : strings[0].size();
    for (const std::string& s : strings) {
      if (s.size() != length) {
        return absl::InvalidArgumentError(absl::StrCat(
            "decode_raw: strings of one tensor must have equal lengths, got ", length, " and ", s.size()));
      }
    }
    if (length % width != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "decode_raw: ", length, " bytes is not a multiple of the ", width, "-byte ", DTypeName(dtype_)));
    }
    Shape shape = input.shape();
    shape.push_back(static_cast<int64_t>(length / width));
    Tensor output(dtype_, shape);
    char* out = static_cast<char*>(output.mutable_raw_data());
    for (size_t i = 0; i < strings.size(); ++i) {
      std::memcpy(out + i * length, strings[i].data(), length);
    }
    if (!little_endian_ && width > 1) {
      for (size_t offset = 0; offset < output.ByteSize(); offset += width) {
        std::reverse(out + offset, out + offset + width);
      }
    }
    return output;
  }

 private:
  const DType dtype_;
  const bool little_endian_;
};

// parse_example: a serialized tf.train.Example to named components, one per
// declared feature, ordered by name.
class ParseExampleFunction : public ElementFunction {
 public:
  struct Feature {
    std::string name;
    DType dtype;
    PartialShape shape;                   // dims fixed, or [-1] for variable length
    std::optional<Tensor> default_value;  // used when the feature is absent
  };

  explicit ParseExampleFunction(std::vector<Feature> features) : features_(std::move(features)) {
    std::vector<std::string> names;
    for (const Feature& f : features_) {
      names.push_back(f.name);
      all_fixed_ = all_fixed_ && f.shape.IsFullyDefined();
    }
    names_ = MakeNames(std::move(names));
  }

  static absl::StatusOr<std::unique_ptr<ElementFunction>> Make(FunctionArgs& args) {
    const proto::AttrValue* value = args.Get("features");
    if (value == nullptr || value->value_case() != proto::AttrValue::kMap) {
      return absl::InvalidArgumentError(
          "parse_example: argument 'features' must map feature names to {dtype, shape}");
    }
    std::vector<Feature> features;
    for (const auto& [name, config] : value->map().entries()) {
      absl::StatusOr<Feature> feature = ParseFeature(name, config);
      if (!feature.ok()) return feature.status();
      features.push_back(*std::move(feature));
    }
    std::sort(features.begin(), features.end(),
              [](const Feature& a, const Feature& b) { return a.name < b.name; });
    if (features.empty()) return absl::InvalidArgumentError("parse_example: 'features' is empty");
    return std::make_unique<ParseExampleFunction>(std::move(features));
  }

  // A vector of serialized Examples (a batch) parses into batched features
  // when every feature has a fixed shape.
  bool IsElementwise() const override { return all_fixed_; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    const bool scalar = input.components.size() == 1 && input.components[0].dtype == DType::kString &&
                        !input.components[0].shape.unknown_rank && input.components[0].shape.dims.empty();
    const bool vector = all_fixed_ && input.components.size() == 1 &&
                        input.components[0].dtype == DType::kString &&
                        !input.components[0].shape.unknown_rank && input.components[0].shape.dims.size() == 1;
    if (!scalar && !vector) {
      return absl::InvalidArgumentError(
          absl::StrCat("parse_example: needs elements of one scalar string (a serialized Example), got ",
                       input.DebugString()));
    }
    ElementSpec output;
    for (const Feature& f : features_) {
      PartialShape shape = f.shape;
      if (vector) shape.dims.insert(shape.dims.begin(), input.components[0].shape.dims[0]);
      output.components.push_back({shape, f.dtype});
      output.names.push_back(f.name);
    }
    return output;
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    const bool ok_input =
        input.size() == 1 && input.components[0].dtype() == DType::kString &&
        (input.components[0].rank() == 0 || (all_fixed_ && input.components[0].rank() == 1));
    if (!ok_input) return absl::InvalidArgumentError("parse_example: needs a scalar string");
    const Tensor& records = input.components[0];
    // Reused across calls on a thread: parsing into a cleared message keeps
    // its allocations.
    thread_local proto::example::Example example;
    Element output;
    output.names = names_;
    if (records.rank() == 1) {
      const int64_t rows = records.dim(0);
      for (const Feature& f : features_) {
        Shape shape = f.shape.dims;
        shape.insert(shape.begin(), rows);
        output.components.push_back(f.dtype == DType::kString ? Tensor(f.dtype, shape)
                                                              : Tensor::Uninitialized(f.dtype, shape));
      }
      for (int64_t row = 0; row < rows; ++row) {
        if (absl::Status s = ParseInto(records.data<std::string>()[row], row, &example, &output); !s.ok())
          return s;
      }
      return output;
    }
    if (!example.ParseFromString(records.data<std::string>()[0])) return NotAnExample();
    const auto& map = example.features().feature();
    for (const Feature& f : features_) {
      auto it = map.find(f.name);
      if (it == map.end()) {
        if (!f.default_value.has_value()) return MissingFeature(f);
        output.components.push_back(*f.default_value);
        continue;
      }
      absl::StatusOr<int64_t> count = ValueCount(f, it->second);
      if (!count.ok()) return count.status();
      Tensor tensor(f.dtype, f.shape.IsFullyDefined() ? f.shape.dims : Shape{*count});
      CopyValues(f, it->second, *count, &tensor, 0);
      output.components.push_back(std::move(tensor));
    }
    return output;
  }

 private:
  static absl::StatusOr<Feature> ParseFeature(const std::string& name, const proto::AttrValue& config) {
    if (config.value_case() != proto::AttrValue::kMap) {
      return absl::InvalidArgumentError(
          absl::StrCat("parse_example: feature '", name, "' must be a map {dtype, shape, default}"));
    }
    Feature feature{name, DType::kInvalid, PartialShape::Known({}), std::nullopt};
    const auto& entries = config.map().entries();
    for (const auto& [key, v] : entries) {
      if (key != "dtype" && key != "shape" && key != "default") {
        return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name,
                                                       "' has unknown key '", key,
                                                       "' (valid: dtype, shape, default)"));
      }
    }
    auto dtype_it = entries.find("dtype");
    if (dtype_it == entries.end() || dtype_it->second.value_case() != proto::AttrValue::kS) {
      return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name, "' needs a dtype"));
    }
    absl::StatusOr<DType> dtype = ParseDType(dtype_it->second.s());
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parse_example: feature '", name, "': ", dtype.status().message()));
    }
    if (*dtype != DType::kInt64 && *dtype != DType::kFloat32 && *dtype != DType::kString) {
      return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name,
                                                     "' must be int64, float32 or string, as in "
                                                     "tf.train.Example"));
    }
    feature.dtype = *dtype;
    if (auto shape_it = entries.find("shape"); shape_it != entries.end()) {
      if (shape_it->second.value_case() != proto::AttrValue::kList) {
        return absl::InvalidArgumentError(
            absl::StrCat("parse_example: feature '", name, "': shape must be a list of sizes"));
      }
      for (const proto::AttrValue& d : shape_it->second.list().values()) {
        if (d.value_case() != proto::AttrValue::kI || d.i() < kUnknownDim) {
          return absl::InvalidArgumentError(
              absl::StrCat("parse_example: feature '", name, "': shape sizes must be >= -1"));
        }
        feature.shape.dims.push_back(d.i());
      }
      const auto unknown = std::count(feature.shape.dims.begin(), feature.shape.dims.end(), kUnknownDim);
      if (unknown > 0 && !(unknown == 1 && feature.shape.dims.size() == 1)) {
        return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name,
                                                       "': only a 1-D shape [-1] may have an unknown size"));
      }
    }
    if (auto default_it = entries.find("default"); default_it != entries.end()) {
      if (!feature.shape.IsFullyDefined()) {
        return absl::InvalidArgumentError(
            absl::StrCat("parse_example: feature '", name, "': a default needs a fully known shape"));
      }
      Tensor value(feature.dtype, feature.shape.dims);
      const proto::AttrValue& d = default_it->second;
      for (int64_t i = 0; i < value.num_elements(); ++i) {
        if (feature.dtype == DType::kString && d.value_case() == proto::AttrValue::kS) {
          value.mutable_data<std::string>()[i] = d.s();
        } else if (feature.dtype == DType::kInt64 && d.value_case() == proto::AttrValue::kI) {
          value.mutable_data<int64_t>()[i] = d.i();
        } else if (feature.dtype == DType::kFloat32 &&
                   (d.value_case() == proto::AttrValue::kF || d.value_case() == proto::AttrValue::kI)) {
          value.mutable_data<float>()[i] =
              static_cast<float>(d.value_case() == proto::AttrValue::kF ? d.f() : d.i());
        } else {
          return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name,
                                                         "': the default must be a scalar ",
                                                         DTypeName(feature.dtype)));
        }
      }
      feature.default_value = std::move(value);
    }
    return feature;
  }

  // Parses one record into row `row` of the batched outputs.
  absl::Status ParseInto(const std::string& record, int64_t row, proto::example::Example* example,
                         Element* output) const {
    if (!example->ParseFromString(record)) return NotAnExample();
    const auto& map = example->features().feature();
    for (size_t i = 0; i < features_.size(); ++i) {
      const Feature& f = features_[i];
      Tensor& out = output->components[i];
      const int64_t row_size = NumElements(f.shape.dims);
      auto it = map.find(f.name);
      if (it == map.end()) {
        if (!f.default_value.has_value()) return MissingFeature(f);
        const Tensor& fallback = *f.default_value;
        for (int64_t k = 0; k < row_size; ++k) {
          if (f.dtype == DType::kString) {
            out.mutable_data<std::string>()[row * row_size + k] = fallback.data<std::string>()[k];
          } else if (f.dtype == DType::kInt64) {
            out.mutable_data<int64_t>()[row * row_size + k] = fallback.data<int64_t>()[k];
          } else {
            out.mutable_data<float>()[row * row_size + k] = fallback.data<float>()[k];
          }
        }
        continue;
      }
      absl::StatusOr<int64_t> count = ValueCount(f, it->second);
      if (!count.ok()) return count.status();
      CopyValues(f, it->second, *count, &out, row * row_size);
    }
    return absl::OkStatus();
  }

  // The number of values of a feature, checked against its dtype and shape.
  static absl::StatusOr<int64_t> ValueCount(const Feature& f, const proto::example::Feature& value) {
    int64_t count = 0;
    switch (f.dtype) {
      case DType::kInt64:
        if (value.kind_case() != proto::example::Feature::kInt64List) return KindMismatch(f);
        count = value.int64_list().value_size();
        break;
      case DType::kFloat32:
        if (value.kind_case() != proto::example::Feature::kFloatList) return KindMismatch(f);
        count = value.float_list().value_size();
        break;
      default:
        if (value.kind_case() != proto::example::Feature::kBytesList) return KindMismatch(f);
        count = value.bytes_list().value_size();
    }
    if (f.shape.IsFullyDefined() && NumElements(f.shape.dims) != count) {
      return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", f.name, "' has ", count,
                                                     " values but shape ", ShapeDebugString(f.shape.dims),
                                                     " needs ", NumElements(f.shape.dims)));
    }
    return count;
  }

  static void CopyValues(const Feature& f, const proto::example::Feature& value, int64_t count, Tensor* out,
                         int64_t offset) {
    if (f.dtype == DType::kInt64) {
      std::copy_n(value.int64_list().value().data(), count, out->mutable_data<int64_t>() + offset);
    } else if (f.dtype == DType::kFloat32) {
      std::copy_n(value.float_list().value().data(), count, out->mutable_data<float>() + offset);
    } else {
      for (int64_t i = 0; i < count; ++i) {
        out->mutable_data<std::string>()[offset + i] = value.bytes_list().value(static_cast<int>(i));
      }
    }
  }

  static absl::Status NotAnExample() {
    return absl::DataLossError("parse_example: the record is not a valid tf.train.Example");
  }

  static absl::Status MissingFeature(const Feature& f) {
    return absl::InvalidArgumentError(
        absl::StrCat("parse_example: feature '", f.name, "' is missing and has no default"));
  }

  static absl::Status KindMismatch(const Feature& f) {
    return absl::InvalidArgumentError(
        absl::StrCat("parse_example: feature '", f.name, "' is not stored as ", DTypeName(f.dtype)));
  }

  std::vector<Feature> features_;
  ComponentNames names_;
  bool all_fixed_ = true;
};

// Registration of the built-ins.

FunctionFactory ArithmeticFactory(Arithmetic op) {
  return [op](FunctionArgs& args) { return ArithmeticFunction::Make(args, op); };
}
FunctionFactory PredicateFactory(Comparison op) {
  return [op](FunctionArgs& args) { return PredicateFunction::Make(args, op); };
}

SLUICE_REGISTER_ELEMENT_FUNCTION("add", "x + value", ArithmeticFactory(Arithmetic::kAdd));
SLUICE_REGISTER_ELEMENT_FUNCTION("subtract", "x - value", ArithmeticFactory(Arithmetic::kSubtract));
SLUICE_REGISTER_ELEMENT_FUNCTION("multiply", "x * value", ArithmeticFactory(Arithmetic::kMultiply));
SLUICE_REGISTER_ELEMENT_FUNCTION("floordiv", "floor(x / value)", ArithmeticFactory(Arithmetic::kFloorDiv));
SLUICE_REGISTER_ELEMENT_FUNCTION("mod", "x mod value, with the sign of value",
                                 ArithmeticFactory(Arithmetic::kMod));
SLUICE_REGISTER_ELEMENT_FUNCTION("square", "x * x", ArithmeticFactory(Arithmetic::kSquare));
SLUICE_REGISTER_ELEMENT_FUNCTION("negate", "-x", ArithmeticFactory(Arithmetic::kNegate));
SLUICE_REGISTER_ELEMENT_FUNCTION("less", "x < value", PredicateFactory(Comparison::kLess));
SLUICE_REGISTER_ELEMENT_FUNCTION("less_equal", "x <= value", PredicateFactory(Comparison::kLessEqual));
SLUICE_REGISTER_ELEMENT_FUNCTION("greater", "x > value", PredicateFactory(Comparison::kGreater));
SLUICE_REGISTER_ELEMENT_FUNCTION("greater_equal", "x >= value", PredicateFactory(Comparison::kGreaterEqual));
SLUICE_REGISTER_ELEMENT_FUNCTION("equal", "x == value", PredicateFactory(Comparison::kEqual));
SLUICE_REGISTER_ELEMENT_FUNCTION("not_equal", "x != value", PredicateFactory(Comparison::kNotEqual));
SLUICE_REGISTER_ELEMENT_FUNCTION("cast", "converts to dtype",
                                 [](FunctionArgs& args) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
                                   absl::StatusOr<ComponentSelector> selector =
                                       ComponentSelector::FromArgs(args);
                                   if (!selector.ok()) return selector.status();
                                   absl::StatusOr<DType> dtype = args.GetDType("dtype");
                                   if (!dtype.ok()) return dtype.status();
                                   return std::make_unique<CastFunction>(*std::move(selector), *dtype);
                                 });
SLUICE_REGISTER_ELEMENT_FUNCTION("select", "keeps the listed components", SelectFunction::Make);
SLUICE_REGISTER_ELEMENT_FUNCTION(
    "decode_raw", "reinterprets string bytes as a vector of dtype",
    [](FunctionArgs& args) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
      absl::StatusOr<ComponentSelector> selector = ComponentSelector::FromArgs(args);
      if (!selector.ok()) return selector.status();
      absl::StatusOr<DType> dtype = args.GetDType("dtype");
      if (!dtype.ok()) return dtype.status();
      if (*dtype == DType::kString) {
        return absl::InvalidArgumentError("decode_raw: dtype must be numeric, not string");
      }
      absl::StatusOr<bool> little_endian = args.GetBool("little_endian", true);
      if (!little_endian.ok()) return little_endian.status();
      return std::make_unique<DecodeRawFunction>(*std::move(selector), *dtype, *little_endian);
    });
SLUICE_REGISTER_ELEMENT_FUNCTION("parse_example", "parses a serialized tf.train.Example",
                                 ParseExampleFunction::Make);

}  // namespace
}  // namespace sluice
