// Elements (tuples of tensors, optionally named) and their specs.
//
// An Element is what a dataset yields: one tensor per component. Names, when
// present, are shared between all elements of a dataset rather than copied.
// An ElementSpec gives each component's dtype and a shape that may have
// unknown dimensions (-1), as after `batch` without `drop_remainder`.
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_ELEMENT_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_ELEMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/tensor.h"

namespace sluice {

using ComponentNames = std::shared_ptr<const std::vector<std::string>>;

struct Element {
  std::vector<Tensor> components;
  // Null for a plain tuple; otherwise one name per component.
  ComponentNames names;

  Element() = default;
  explicit Element(std::vector<Tensor> components_in, ComponentNames names_in = nullptr)
      : components(std::move(components_in)), names(std::move(names_in)) {}

  // A one-component element. Prefer it to Element({t}), whose
  // initializer_list copies the tensor.
  static Element Of(Tensor tensor) {
    Element element;
    element.components.reserve(1);
    element.components.push_back(std::move(tensor));
    return element;
  }

  size_t size() const { return components.size(); }
  bool named() const { return names != nullptr; }
  // The bytes of the components' data (what buffers and rates count).
  int64_t ByteSize() const {
    int64_t bytes = 0;
    for (const Tensor& t : components) bytes += static_cast<int64_t>(t.ByteSize());
    return bytes;
  }
  bool operator==(const Element& other) const;
  std::string DebugString() const;
};

inline ComponentNames MakeNames(std::vector<std::string> names) {
  if (names.empty()) return nullptr;
  return std::make_shared<const std::vector<std::string>>(std::move(names));
}

// A shape whose dimensions may be unknown (kUnknownDim), or whose rank may
// be unknown altogether.
inline constexpr int64_t kUnknownDim = -1;

struct PartialShape {
  std::vector<int64_t> dims;
  bool unknown_rank = false;

  static PartialShape Known(const Shape& shape) { return PartialShape{shape, false}; }
  static PartialShape UnknownRank() { return PartialShape{{}, true}; }
  bool IsFullyDefined() const;
  // Whether a concrete shape fits this partial one.
  bool IsCompatibleWith(const Shape& shape) const;
  // The most specific shape that both fit (unknown where they differ).
  PartialShape MostSpecificCommon(const PartialShape& other) const;
  bool operator==(const PartialShape& other) const = default;
  std::string DebugString() const;  // "[?, 3]", "<unknown>"
};

struct TensorSpec {
  PartialShape shape;
  DType dtype = DType::kInvalid;

  bool operator==(const TensorSpec& other) const = default;
  std::string DebugString() const;  // "TensorSpec(shape=[?], dtype=int64)"
};

struct ElementSpec {
  std::vector<TensorSpec> components;
  std::vector<std::string> names;  // empty, or one per component

  static ElementSpec Of(const Element& element);
  bool operator==(const ElementSpec& other) const = default;
  std::string DebugString() const;
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_ELEMENT_H_
