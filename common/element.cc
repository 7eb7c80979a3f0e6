#include "sluice/element.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice {

bool Element::operator==(const Element& other) const {
  if (components != other.components) return false;
  if (named() != other.named()) return false;
  return !named() || *names == *other.names;
}

std::string Element::DebugString() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < components.size(); ++i) {
    std::string prefix = named() ? absl::StrCat((*names)[i], "=") : "";
    parts.push_back(prefix + components[i].DebugString());
  }
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

bool PartialShape::IsFullyDefined() const {
  if (unknown_rank) return false;
  for (int64_t d : dims) {
    if (d == kUnknownDim) return false;
  }
  return true;
}

bool PartialShape::IsCompatibleWith(const Shape& shape) const {
  if (unknown_rank) return true;
  if (dims.size() != shape.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != kUnknownDim && dims[i] != shape[i]) return false;
  }
  return true;
}

PartialShape PartialShape::MostSpecificCommon(const PartialShape& other) const {
  if (unknown_rank || other.unknown_rank || dims.size() != other.dims.size()) {
    return UnknownRank();
  }
  PartialShape result = *this;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != other.dims[i]) result.dims[i] = kUnknownDim;
  }
  return result;
}

std::string PartialShape::DebugString() const {
  if (unknown_rank) return "<unknown>";
  std::vector<std::string> parts;
  for (int64_t d : dims) parts.push_back(d == kUnknownDim ? "?" : std::to_string(d));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

std::string TensorSpec::DebugString() const {
  return absl::StrCat("TensorSpec(shape=", shape.DebugString(), ", dtype=", DTypeName(dtype), ")");
}

ElementSpec ElementSpec::Of(const Element& element) {
  ElementSpec spec;
  for (const Tensor& t : element.components) {
    spec.components.push_back({PartialShape::Known(t.shape()), t.dtype()});
  }
  if (element.named()) spec.names = *element.names;
  return spec;
}

std::string ElementSpec::DebugString() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < components.size(); ++i) {
    std::string prefix = names.empty() ? "" : absl::StrCat(names[i], ": ");
    parts.push_back(prefix + components[i].DebugString());
  }
  if (!names.empty()) return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
  if (parts.size() == 1) return parts[0];
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

}  // namespace sluice
