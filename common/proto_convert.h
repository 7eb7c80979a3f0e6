// Conversions between the in-memory tensor types and their proto forms
// (proto/sluice/tensor.proto). Decoding validates sizes and dtypes, so a
// malformed message is an error, never an out-of-bounds read.
#ifndef SLUICE_COMMON_PROTO_CONVERT_H_
#define SLUICE_COMMON_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "common/element.h"
#include "sluice/tensor.pb.h"

namespace sluice {

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
