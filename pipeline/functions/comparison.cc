// The comparison predicates for `filter`: less, less_equal, greater,
// greater_equal, equal and not_equal. Each is documented in docs/pipeline.md.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"

namespace sluice {
namespace {

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
    if (value == nullptr) return args.MissingRequired("value");
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

FunctionFactory PredicateFactory(Comparison op) {
  return [op](FunctionArgs& args) { return PredicateFunction::Make(args, op); };
}

SLUICE_REGISTER_ELEMENT_FUNCTION("less", "x < value", PredicateFactory(Comparison::kLess));
SLUICE_REGISTER_ELEMENT_FUNCTION("less_equal", "x <= value", PredicateFactory(Comparison::kLessEqual));
SLUICE_REGISTER_ELEMENT_FUNCTION("greater", "x > value", PredicateFactory(Comparison::kGreater));
SLUICE_REGISTER_ELEMENT_FUNCTION("greater_equal", "x >= value", PredicateFactory(Comparison::kGreaterEqual));
SLUICE_REGISTER_ELEMENT_FUNCTION("equal", "x == value", PredicateFactory(Comparison::kEqual));
SLUICE_REGISTER_ELEMENT_FUNCTION("not_equal", "x != value", PredicateFactory(Comparison::kNotEqual));

}  // namespace
}  // namespace sluice
