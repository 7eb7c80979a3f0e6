#include "pipeline/yaml_tensors.h"

#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "pipeline/yaml_keys.h"

namespace sluice {
namespace {

absl::Status YamlError(const std::string& source, const YAML::Node& node, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(YamlLocation(node, source), ": ", message));
}

// Walks nested lists, checking they are rectangular. The shape comes from
// the first item at each depth.
absl::Status Flatten(const YAML::Node& node, size_t depth, Shape* shape, std::vector<YAML::Node>* leaves,
                     const std::string& what, const std::string& source) {
  if (depth == 0) {
    // reset(), not operator=: assigning a YAML::Node writes through to
    // the document.
    for (YAML::Node probe = node; probe.IsSequence();) {
      shape->push_back(static_cast<int64_t>(probe.size()));
      if (probe.size() == 0) break;
      probe.reset(probe[0]);
    }
  }
  if (depth == shape->size()) {
    if (!node.IsScalar()) return YamlError(source, node, absl::StrCat(what, ": nested lists are ragged"));
    leaves->push_back(node);
    return absl::OkStatus();
  }
  if (!node.IsSequence() || static_cast<int64_t>(node.size()) != (*shape)[depth]) {
    return YamlError(source, node, absl::StrCat(what, ": nested lists are ragged"));
  }
  for (const auto& item : node) {
    if (absl::Status s = Flatten(item, depth + 1, shape, leaves, what, source); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

bool IsTypedTensorLiteral(const YAML::Node& node) {
  if (!node.IsMap() || !node["values"]) return false;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (key != "values" && key != "dtype") return false;
  }
  return true;
}

absl::StatusOr<Tensor> ParseYamlTensor(const YAML::Node& node, const std::string& what,
                                       const std::string& source) {
  std::optional<DType> wanted;
  YAML::Node values;
  values.reset(node);
  if (IsTypedTensorLiteral(node)) {
    values.reset(node["values"]);
    if (node["dtype"]) {
      absl::StatusOr<DType> dtype = ParseDType(node["dtype"].Scalar());
      if (!dtype.ok())
        return YamlError(source, node["dtype"], absl::StrCat(what, ": ", dtype.status().message()));
      wanted = *dtype;
    }
  } else if (node.IsMap()) {
    return YamlError(source, node, absl::StrCat(what, ": expected a value, a list, or {values, dtype}"));
  }
  Shape shape;
  std::vector<YAML::Node> leaves;
  if (absl::Status s = Flatten(values, 0, &shape, &leaves, what, source); !s.ok()) return s;
  // Infer the narrowest kind that holds every leaf.
  enum Kind { kInt, kFloat, kBool, kString, kNone } kind = kNone;
  for (const YAML::Node& leaf : leaves) {
    Kind k;
    int64_t i;
    double f;
    const std::string& s = leaf.Scalar();
    uint64_t u;
    if (leaf.Tag() == "!")
      k = kString;
    else if (absl::SimpleAtoi(s, &i) || absl::SimpleAtoi(s, &u))
      k = kInt;  // u: past INT64_MAX
    else if (LooksNumeric(s) && absl::SimpleAtod(s, &f))
      k = kFloat;
    else if (s == "true" || s == "false")
      k = kBool;
    else
      k = kString;
    if (kind == kNone || (kind == kInt && k == kFloat))
      kind = k;
    else if (!(kind == kFloat && k == kInt) && kind != k) {
      return YamlError(source, leaf,
                       absl::StrCat(what, ": mixes value kinds ('", s, "' does not match the others)"));
    }
  }
  DType dtype = kind == kInt      ? DType::kInt64
                : kind == kBool   ? DType::kBool
                : kind == kString ? DType::kString
                                  : DType::kFloat32;
  if (wanted.has_value() && *wanted == DType::kString && kind != kString && kind != kNone) {
    return YamlError(source, values, absl::StrCat(what, ": string tensors need string values"));
  }
  if (wanted.has_value() && *wanted != DType::kString && kind == kString) {
    return YamlError(source, values,
                     absl::StrCat(what, ": ", DTypeName(*wanted), " tensors need numeric values"));
  }
  if (wanted == DType::kFloat64 || wanted == DType::kInt64 || wanted == DType::kUInt64) {
    dtype = *wanted;  // parse at full width, not through float32/int64
    if (kind == kFloat && *wanted != DType::kFloat64) dtype = DType::kFloat64;
  }
  Tensor tensor(dtype, shape);
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string& s = leaves[i].Scalar();
    switch (dtype) {
      case DType::kInt64: {
        int64_t v = 0;
        if (!absl::SimpleAtoi(s, &v)) {
          return YamlError(source, leaves[i],
                           absl::StrCat(what, ": '", s, "' does not fit in int64; give dtype: uint64"));
        }
        tensor.mutable_data<int64_t>()[i] = v;
        break;
      }
      case DType::kUInt64: {
        uint64_t v = 0;
        if (!absl::SimpleAtoi(s, &v)) {
          return YamlError(source, leaves[i], absl::StrCat(what, ": '", s, "' is not an unsigned integer"));
        }
        tensor.mutable_data<uint64_t>()[i] = v;
        break;
      }
      case DType::kFloat32:
      case DType::kFloat64: {
        double v = 0;
        absl::SimpleAtod(s, &v);
        if (dtype == DType::kFloat32)
          tensor.mutable_data<float>()[i] = static_cast<float>(v);
        else
          tensor.mutable_data<double>()[i] = v;
        break;
      }
      case DType::kBool:
        tensor.mutable_data<bool>()[i] = s == "true";
        break;
      default:
        tensor.mutable_data<std::string>()[i] = s;
    }
  }
  if (wanted.has_value() && *wanted != tensor.dtype()) {
    absl::StatusOr<Tensor> cast = CastTensor(tensor, *wanted);
    if (!cast.ok()) return YamlError(source, values, absl::StrCat(what, ": ", cast.status().message()));
    return cast;
  }
  return tensor;
}

}  // namespace sluice
