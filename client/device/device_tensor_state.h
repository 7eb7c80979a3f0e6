// What a DeviceTensor is made of, for the prefetcher that makes them. Not
// installed: the public DeviceTensor holds this behind a pointer.
#ifndef SLUICE_CLIENT_DEVICE_DEVICE_TENSOR_STATE_H_
#define SLUICE_CLIENT_DEVICE_DEVICE_TENSOR_STATE_H_

#include <cstddef>
#include <memory>

#include "sluice/distribute.h"

namespace sluice {

class DeviceBackend;

namespace internal {

struct DeviceTensorState {
  DType dtype = DType::kInvalid;
  Shape shape;
  size_t byte_size = 0;
  Device device;
  void* data = nullptr;
  std::shared_ptr<void> lease;             // holds the pooled buffer
  Tensor host;                             // CPU replicas: the same bytes as a Tensor
  std::shared_ptr<DeviceBackend> backend;  // GPU replicas: for ToHostTensor
};

struct DeviceTensorAccess {
  // A default-constructed DeviceTensor reads as an empty, invalid one.
  static const DeviceTensorState& State(const DeviceTensor& tensor) {
    static const DeviceTensorState kEmpty;
    return tensor.state_ != nullptr ? *tensor.state_ : kEmpty;
  }
  static DeviceTensor Make(DeviceTensorState state) {
    DeviceTensor tensor;
    tensor.state_ = std::make_shared<const DeviceTensorState>(std::move(state));
    return tensor;
  }
};

}  // namespace internal
}  // namespace sluice

#endif  // SLUICE_CLIENT_DEVICE_DEVICE_TENSOR_STATE_H_
