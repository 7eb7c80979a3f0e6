// Conversions between the in-memory tensor types and their proto forms
// (proto/sluice/proto/tensor.proto). Decoding validates sizes and dtypes, so a
// malformed message is an error, never an out-of-bounds read.
#ifndef SLUICE_COMMON_PROTO_CONVERT_H_
#define SLUICE_COMMON_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "sluice/element.h"
#include "sluice/proto/tensor.pb.h"

namespace sluice {

// The dtype of a proto, or InvalidArgument for one that Sluice lacks.
absl::StatusOr<DType> CheckedDType(proto::DataType dtype);
// OK when `bytes` of content are exactly a tensor of this dtype and shape;
// otherwise InvalidArgument saying so. Safe against shapes that overflow.
absl::Status CheckContentSize(DType dtype, const Shape& shape, uint64_t bytes);

void TensorToProto(const Tensor& tensor, proto::TensorProto* out);
absl::StatusOr<Tensor> TensorFromProto(const proto::TensorProto& proto);

void ElementToProto(const Element& element, proto::ElementProto* out);
absl::StatusOr<Element> ElementFromProto(const proto::ElementProto& proto);

void PartialShapeToProto(const PartialShape& shape, proto::PartialShapeProto* out);
PartialShape PartialShapeFromProto(const proto::PartialShapeProto& proto);

void ElementSpecToProto(const ElementSpec& spec, proto::ElementSpecProto* out);
absl::StatusOr<ElementSpec> ElementSpecFromProto(const proto::ElementSpecProto& proto);

}  // namespace sluice

#endif  // SLUICE_COMMON_PROTO_CONVERT_H_
