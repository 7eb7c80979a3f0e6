#include "pipeline/declared_spec.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace sluice {
namespace {

constexpr char kTypeForms[] =
    "a dtype, with [d, ...] for a shape (? for an unknown size, [] for a vector, [...] for any rank), as in "
    "\"float32[?,?,3]\"";

absl::StatusOr<TensorSpec> ParseType(const std::string& text, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": '", text, "' is not a type",
                                                   why.empty() ? "" : absl::StrCat(" (", why, ")"),
                                                   ": write ", kTypeForms));
  };
  const std::string type(absl::StripAsciiWhitespace(text));
  const size_t open = type.find('[');
  absl::StatusOr<DType> dtype = ParseDType(type.substr(0, open));
  if (!dtype.ok()) return bad(std::string(dtype.status().message()));
  TensorSpec spec{PartialShape::Known({}), *dtype};
  if (open == std::string::npos) return spec;
  if (type.back() != ']') return bad("no closing ]");
  const std::string dims = type.substr(open + 1, type.size() - open - 2);
  if (dims == "...") return TensorSpec{PartialShape::UnknownRank(), *dtype};
  if (absl::StripAsciiWhitespace(dims).empty()) return TensorSpec{PartialShape::Known({kUnknownDim}), *dtype};
  for (absl::string_view dim : absl::StrSplit(dims, ',')) {
    dim = absl::StripAsciiWhitespace(dim);
    int64_t size = 0;
    if (dim == "?") {
      size = kUnknownDim;
    } else if (!absl::SimpleAtoi(dim, &size) || size < 0) {
      return bad(absl::StrCat("size '", dim, "' is neither a count nor ?"));
    }
    spec.shape.dims.push_back(size);
  }
  return spec;
}

class DeclaredSpecFunction : public ElementFunction {
 public:
  DeclaredSpecFunction(std::unique_ptr<ElementFunction> function, ElementSpec spec, std::string name)
      : function_(std::move(function)),
        spec_(std::move(spec)),
        names_(MakeNames(spec_.names)),
        name_(std::move(name)) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec&) const override { return spec_; }
  absl::StatusOr<Element> Call(const Element& input) const override {
    return Conform(function_->Call(input));
  }
  absl::StatusOr<Element> CallOwned(Element input) const override {
    return Conform(function_->CallOwned(std::move(input)));
  }

 private:
  // Steps after this one trust the declared spec: an element that breaks
  // it is this function's error, not theirs.
  absl::StatusOr<Element> Conform(absl::StatusOr<Element> output) const {
    if (!output.ok()) return output;
    const size_t count = spec_.components.size();
    bool fits = output->size() == count && output->named() == !spec_.names.empty();
    if (fits && output->named()) {
      std::vector<Tensor> ordered;
      ordered.reserve(count);
      for (const std::string& name : spec_.names) {
        const auto& names = *output->names;
        const auto found = std::find(names.begin(), names.end(), name);
        if (found == names.end()) break;
        ordered.push_back(std::move(output->components[found - names.begin()]));
      }
      fits = ordered.size() == count;
      if (fits) *output = Element(std::move(ordered), names_);
    }
    for (size_t i = 0; fits && i < count; ++i) {
      const TensorSpec& declared = spec_.components[i];
      fits = declared.dtype == output->components[i].dtype() &&
             declared.shape.IsCompatibleWith(output->components[i].shape());
    }
    if (fits) return output;
    return absl::InvalidArgumentError(absl::StrCat(name_, " returned ",
                                                   ElementSpec::Of(*output).DebugString(),
                                                   ", not its declared output_spec ", spec_.DebugString()));
  }

  const std::unique_ptr<ElementFunction> function_;
  const ElementSpec spec_;
  const ComponentNames names_;
  const std::string name_;
};

}  // namespace

absl::StatusOr<ElementSpec> ParseDeclaredSpec(const proto::AttrValue& value, const std::string& function) {
  const std::string where = function.empty() ? "output_spec" : absl::StrCat(function, ": output_spec");
  ElementSpec spec;
  auto add = [&](const proto::AttrValue& type, const std::string& component) -> absl::Status {
    if (type.value_case() != proto::AttrValue::kS) {
      return absl::InvalidArgumentError(absl::StrCat(where, component, " must be a type: ", kTypeForms));
    }
    absl::StatusOr<TensorSpec> parsed = ParseType(type.s(), absl::StrCat(where, component));
    if (!parsed.ok()) return parsed.status();
    spec.components.push_back(*parsed);
    return absl::OkStatus();
  };
  switch (value.value_case()) {
    case proto::AttrValue::kS:
      if (absl::Status s = add(value, ""); !s.ok()) return s;
      break;
    case proto::AttrValue::kList:
      for (int i = 0; i < value.list().values_size(); ++i) {
        if (absl::Status s = add(value.list().values(i), absl::StrCat(" component ", i)); !s.ok()) return s;
      }
      break;
    case proto::AttrValue::kMap: {
      const std::map<std::string, proto::AttrValue> sorted(value.map().entries().begin(),
                                                           value.map().entries().end());
      for (const auto& [name, type] : sorted) {
        if (absl::Status s = add(type, absl::StrCat(" '", name, "'")); !s.ok()) return s;
        spec.names.push_back(name);
      }
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          where, " must be a type, a list of types or a map of component names to types; a type is ",
          kTypeForms));
  }
  if (spec.components.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " declares no component"));
  }
  return spec;
}

std::string DeclaredTypeName(const TensorSpec& spec) {
  if (spec.shape.unknown_rank) return absl::StrCat(DTypeName(spec.dtype), "[...]");
  if (spec.shape.dims.empty()) return DTypeName(spec.dtype);
  std::vector<std::string> dims;
  for (int64_t d : spec.shape.dims) dims.push_back(d == kUnknownDim ? "?" : std::to_string(d));
  return absl::StrCat(DTypeName(spec.dtype), "[", absl::StrJoin(dims, ","), "]");
}

proto::AttrValue DeclaredSpecToAttr(const ElementSpec& spec) {
  proto::AttrValue value;
  if (!spec.names.empty()) {
    for (size_t i = 0; i < spec.components.size(); ++i) {
      (*value.mutable_map()->mutable_entries())[spec.names[i]].set_s(DeclaredTypeName(spec.components[i]));
    }
  } else {
    value.mutable_list();
    for (const TensorSpec& component : spec.components) {
      value.mutable_list()->add_values()->set_s(DeclaredTypeName(component));
    }
  }
  return value;
}

std::unique_ptr<ElementFunction> WithDeclaredSpec(std::unique_ptr<ElementFunction> function, ElementSpec spec,
                                                  std::string name) {
  return std::make_unique<DeclaredSpecFunction>(std::move(function), std::move(spec), std::move(name));
}

}  // namespace sluice
