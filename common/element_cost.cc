#include "common/element_cost.h"

#include <string>

namespace sluice {

int64_t ElementCost(const Element& element) {
  int64_t bytes = static_cast<int64_t>(sizeof(Element));
  if (!element.components.empty()) {
    bytes += static_cast<int64_t>(element.components.capacity() * sizeof(Tensor)) + kAllocationOverheadBytes;
  }
  for (const Tensor& tensor : element.components) {
    bytes += kTensorOverheadBytes + static_cast<int64_t>(tensor.ByteSize());
    if (!tensor.shape().empty()) {
      bytes += static_cast<int64_t>(tensor.shape().size() * sizeof(int64_t)) + kAllocationOverheadBytes;
    }
    if (tensor.dtype() != DType::kString) continue;
    for (const std::string& value : tensor.values<std::string>()) {
      bytes += static_cast<int64_t>(sizeof(std::string));
      // Past the small-string buffer a value has a heap block of its own.
      if (value.capacity() > std::string().capacity()) bytes += kAllocationOverheadBytes;
    }
  }
  return bytes;
}

}  // namespace sluice
