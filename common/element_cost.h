// What an element really costs in memory, for the buffers that bound what
// a daemon holds by bytes (the cross-trainer cache, a task's buffer).
// Element::ByteSize counts the components' data only, so an element of
// empty strings weighs 0 and a buffer bounded by it never fills; this adds
// the bookkeeping every element and tensor carries.
#ifndef SLUICE_COMMON_ELEMENT_COST_H_
#define SLUICE_COMMON_ELEMENT_COST_H_

#include <cstdint>

#include "sluice/element.h"

namespace sluice {

// malloc's header and rounding on each allocation, as glibc makes them.
inline constexpr int64_t kAllocationOverheadBytes = 16;
// One tensor's fixed cost: the Tensor, and its buffer made by
// std::make_shared (the TensorBuffer, its control block) in one allocation.
inline constexpr int64_t kTensorOverheadBytes =
    static_cast<int64_t>(sizeof(Tensor) + sizeof(TensorBuffer)) + 16 + kAllocationOverheadBytes;

// The bytes `element` holds: its data, the element and its tensors, their
// shapes, and for a string tensor a std::string per value (plus the heap
// block of each past the small-string buffer). At least one byte more
// than Element::ByteSize for any element.
int64_t ElementCost(const Element& element);

}  // namespace sluice

#endif  // SLUICE_COMMON_ELEMENT_COST_H_
