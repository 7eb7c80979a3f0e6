#include "common/proto_convert.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; big-endian hosts need byte swapping here");

}  // namespace

absl::StatusOr<DType> CheckedDType(proto::DataType dtype) {
  const auto value = static_cast<DType>(dtype);
  if (value == DType::kInvalid || DTypeName(value) == "invalid") {
    return absl::InvalidArgumentError(absl::StrCat("invalid dtype ", static_cast<int>(dtype)));
  }
  return value;
}

absl::Status CheckContentSize(DType dtype, const Shape& shape, uint64_t bytes) {
  const uint64_t element_size = std::max<uint64_t>(1, DTypeSize(dtype));
  // Counted up to a bound that cannot overflow, so a huge shape is refused
  // without overflowing or allocating.
  const uint64_t bound = (uint64_t{1} << 62) / element_size;
  uint64_t count = 1;
  bool fits = true;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError("tensor proto has a negative dimension");
    if (d != 0 && count > bound / static_cast<uint64_t>(d)) fits = false;
    if (fits) count *= static_cast<uint64_t>(d);
  }
  // A zero dimension makes the tensor empty, but only if the dimensions
  // before it can be counted (within 2^62 bytes): [2^40, 2^40, 0] is
  // refused, as no tensor can have it (NumElements is -1 for it), while
  // [0, 2^40, 2^40] is empty.
  bool empty = false;
  for (int64_t d : shape) empty = empty || d == 0;
  if (fits && empty) count = 0;
  if (fits && count * element_size == bytes) return absl::OkStatus();
  // Named only on the error path: this runs for every tensor received.
  const std::string what = absl::StrCat(DTypeName(dtype), " tensor of shape ", ShapeDebugString(shape));
  if (!fits && empty) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the dimensions before its 0 are too large to count"));
  }
  if (!fits)
    return absl::InvalidArgumentError(absl::StrCat(what, " needs more than the ", bytes, " bytes it got"));
  return absl::InvalidArgumentError(
      absl::StrCat(what, " needs ", count * element_size, " bytes, got ", bytes));
}

void TensorToProto(const Tensor& tensor, proto::TensorProto* out) {
  out->Clear();
  out->set_dtype(static_cast<proto::DataType>(tensor.dtype()));
  for (int64_t d : tensor.shape()) out->mutable_shape()->add_dims(d);
  if (tensor.dtype() == DType::kString) {
    for (const std::string& s : tensor.values<std::string>()) out->add_string_values(s);
  } else {
    out->set_content(static_cast<const char*>(tensor.raw_data()), tensor.ByteSize());
  }
}

absl::StatusOr<Tensor> TensorFromProto(const proto::TensorProto& proto) {
  absl::StatusOr<DType> dtype = CheckedDType(proto.dtype());
  if (!dtype.ok()) return dtype.status();
  Shape shape(proto.shape().dims().begin(), proto.shape().dims().end());
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError("tensor proto has a negative dimension");
  }
  if (*dtype == DType::kString) {
    // Each value is at least one byte on the wire, which bounds the count.
    if (absl::Status s = CheckContentSize(DType::kUInt8, shape, proto.string_values_size()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("string tensor of shape ", ShapeDebugString(shape),
                                                     " has ", proto.string_values_size(), " values"));
    }
  } else if (absl::Status s = CheckContentSize(*dtype, shape, proto.content().size()); !s.ok()) {
    return s;
  }
  // Every byte is overwritten below, so skip the zero-fill (it showed up at
  // 5-7% of the data plane's time on 1 MiB elements).
  Tensor tensor = *dtype == DType::kString ? Tensor(*dtype, shape) : Tensor::Uninitialized(*dtype, shape);
  if (*dtype == DType::kString) {
    if (proto.string_values_size() != tensor.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("string tensor of shape ", ShapeDebugString(shape),
                                                     " has ", proto.string_values_size(), " values"));
    }
    std::string* out = tensor.mutable_data<std::string>();
    for (int i = 0; i < proto.string_values_size(); ++i) out[i] = proto.string_values(i);
  } else {
    if (proto.content().size() != tensor.ByteSize()) {
      return absl::InvalidArgumentError(absl::StrCat(DTypeName(*dtype), " tensor of shape ",
                                                     ShapeDebugString(shape), " needs ", tensor.ByteSize(),
                                                     " bytes, got ", proto.content().size()));
    }
    if (!proto.content().empty()) {
      std::memcpy(tensor.mutable_raw_data(), proto.content().data(), proto.content().size());
    }
  }
  return tensor;
}

void ElementToProto(const Element& element, proto::ElementProto* out) {
  out->Clear();
  for (const Tensor& t : element.components) TensorToProto(t, out->add_components());
  if (element.named()) {
    for (const std::string& name : *element.names) out->add_names(name);
  }
}

absl::StatusOr<Element> ElementFromProto(const proto::ElementProto& proto) {
  if (proto.names_size() != 0 && proto.names_size() != proto.components_size()) {
    return absl::InvalidArgumentError(absl::StrCat("element proto has ", proto.components_size(),
                                                   " components but ", proto.names_size(), " names"));
  }
  Element element;
  for (const proto::TensorProto& component : proto.components()) {
    absl::StatusOr<Tensor> tensor = TensorFromProto(component);
    if (!tensor.ok()) return tensor.status();
    element.components.push_back(*std::move(tensor));
  }
  element.names = MakeNames({proto.names().begin(), proto.names().end()});
  return element;
}

void PartialShapeToProto(const PartialShape& shape, proto::PartialShapeProto* out) {
  out->Clear();
  out->set_unknown_rank(shape.unknown_rank);
  for (int64_t d : shape.dims) out->add_dims(d);
}

PartialShape PartialShapeFromProto(const proto::PartialShapeProto& proto) {
  PartialShape shape;
  shape.unknown_rank = proto.unknown_rank();
  shape.dims.assign(proto.dims().begin(), proto.dims().end());
  return shape;
}

void ElementSpecToProto(const ElementSpec& spec, proto::ElementSpecProto* out) {
  out->Clear();
  for (const TensorSpec& component : spec.components) {
    proto::TensorSpecProto* c = out->add_components();
    PartialShapeToProto(component.shape, c->mutable_shape());
    c->set_dtype(static_cast<proto::DataType>(component.dtype));
  }
  for (const std::string& name : spec.names) out->add_names(name);
}

absl::StatusOr<ElementSpec> ElementSpecFromProto(const proto::ElementSpecProto& proto) {
  if (proto.names_size() != 0 && proto.names_size() != proto.components_size()) {
    return absl::InvalidArgumentError("element spec proto has mismatched names and components");
  }
  ElementSpec spec;
  for (const proto::TensorSpecProto& c : proto.components()) {
    absl::StatusOr<DType> dtype = CheckedDType(c.dtype());
    if (!dtype.ok()) return dtype.status();
    spec.components.push_back({PartialShapeFromProto(c.shape()), *dtype});
  }
  spec.names.assign(proto.names().begin(), proto.names().end());
  return spec;
}

}  // namespace sluice
