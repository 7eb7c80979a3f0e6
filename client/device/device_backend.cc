#include "client/device/device_backend.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace sluice {
namespace {

class CompleteFence : public ReadyFence {
 public:
  absl::Status Wait() override { return absl::OkStatus(); }
  absl::Status WaitOnStream(void* stream) override { return absl::OkStatus(); }
  void* native_event() const override { return nullptr; }
};

void* AlignedAllocate(size_t bytes) {
  const size_t rounded = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  return std::aligned_alloc(kBufferAlignment, rounded == 0 ? kBufferAlignment : rounded);
}

class CpuBackend : public DeviceBackend {
 public:
  explicit CpuBackend(const Device& device) : device_(device), complete_(std::make_shared<CompleteFence>()) {}
  const Device& device() const override { return device_; }
  bool host_addressable() const override { return true; }
  absl::StatusOr<void*> AllocateStaging(size_t bytes) override { return Allocate(bytes); }
  void FreeStaging(void* data) override { std::free(data); }
  absl::StatusOr<void*> AllocateDevice(size_t bytes) override { return Allocate(bytes); }
  void FreeDevice(void* data) override { std::free(data); }
  absl::Status CopyToDevice(void* device_data, const void* staging_data, size_t bytes) override {
    std::memcpy(device_data, staging_data, bytes);
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<ReadyFence>> RecordFence() override { return complete_; }
  absl::StatusOr<std::shared_ptr<ReadyFence>> RecordFenceOn(void* stream) override { return complete_; }
  absl::Status CopyToHost(void* host_data, const void* device_data, size_t bytes) override {
    std::memcpy(host_data, device_data, bytes);
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<void*> Allocate(size_t bytes) {
    void* data = AlignedAllocate(bytes);
    if (data == nullptr) {
      return absl::ResourceExhaustedError("cannot allocate " + std::to_string(bytes) + " bytes for " +
                                          device_.name());
    }
    return data;
  }

  const Device device_;
  const std::shared_ptr<ReadyFence> complete_;
};

}  // namespace

std::unique_ptr<DeviceBackend> MakeCpuBackend(const Device& device) {
  return std::make_unique<CpuBackend>(device);
}

#ifndef SLUICE_WITH_CUDA
absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeCudaBackend(const Device& device) {
  return absl::FailedPreconditionError(device.name() +
                                       " is not available: this Sluice was built without CUDA "
                                       "(configure with -DSLUICE_ENABLE_CUDA=ON); CPU replicas work");
}

int NumLocalGpus() { return 0; }
void UsePinnedHostBuffers() {}
#endif

absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeDeviceBackend(const Device& device) {
  if (device.kind == DeviceKind::kCpu) return MakeCpuBackend(device);
  return MakeCudaBackend(device);
}

}  // namespace sluice
