// The devices a trainer's replicas live on: a CPU or one of this
// process's GPUs.
//
//   absl::StatusOr<sluice::Device> gpu = sluice::Device::Parse("GPU:1");
//   gpu->name();  // "GPU:1"
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_DEVICE_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_DEVICE_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sluice {

enum class DeviceKind { kCpu, kGpu };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  // "CPU:0", "GPU:1".
  std::string name() const;
  // Accepts "CPU:0", "GPU:1" and TensorFlow's "/gpu:1" or
  // "/job:localhost/device:GPU:1", in any case.
  static absl::StatusOr<Device> Parse(std::string_view name);
  bool operator==(const Device& other) const = default;
};

// The number of GPUs this process can use: 0 in a build without CUDA or on
// a machine without a GPU.
int NumLocalGpus();

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_DEVICE_H_
