// Stacking elements into batches and slicing batches back into rows,
// shared by batch, padded_batch, unbatch and rebatch (and later by the
// client's per-replica split).
#ifndef SLUICE_PIPELINE_BATCH_UTIL_H_
#define SLUICE_PIPELINE_BATCH_UTIL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sluice/element.h"

namespace sluice {

// Stacks same-shaped elements along a new first dimension.
absl::StatusOr<Element> StackElements(const std::vector<Element>& elements);

// Stacks elements, padding each component to `padded_shapes` (kUnknownDim:
// the longest in the batch; an empty list pads every dimension that way)
// with `padding_values` (scalars; empty means zeros and empty strings).
absl::StatusOr<Element> PaddedStackElements(const std::vector<Element>& elements,
                                            const std::vector<PartialShape>& padded_shapes,
                                            const std::vector<Tensor>& padding_values);

// Concatenates batches along their first dimension (one copy).
absl::StatusOr<Element> ConcatBatches(const std::vector<Element>& batches);

// The rows [begin, end) of a batch, sharing its buffers.
Element SliceBatch(const Element& batch, int64_t begin, int64_t end);

// The number of rows of a batch: the common first dimension of its
// components, or an error if they differ or one is a scalar.
absl::StatusOr<int64_t> BatchRows(const Element& batch, const char* op);

// The spec of a batch of `spec` elements (first dimension batch_size, or
// unknown) and of one row of a `spec` batch.
ElementSpec BatchedSpec(const ElementSpec& spec, int64_t batch_size);
absl::StatusOr<ElementSpec> UnbatchedSpec(const ElementSpec& spec, const char* op);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_BATCH_UTIL_H_
