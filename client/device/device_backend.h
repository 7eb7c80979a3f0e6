// What the device prefetcher needs from a device: staging and device
// memory, and an ordered asynchronous copy between them. The CUDA backend
// uses pinned host memory, cudaMalloc and one stream per device; the CPU
// backend uses plain host memory and a synchronous memcpy, so CPU replicas
// and the prefetcher's tests need no GPU.
#ifndef SLUICE_CLIENT_DEVICE_DEVICE_BACKEND_H_
#define SLUICE_CLIENT_DEVICE_DEVICE_BACKEND_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "sluice/distribute.h"

namespace sluice {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual const Device& device() const = 0;
  // True when device memory is ordinary host memory (a CPU replica): the
  // prefetcher then packs straight into it, with no staging copy.
  virtual bool host_addressable() const = 0;

  // Host memory the copy engine reads from (pinned on a GPU).
  virtual absl::StatusOr<void*> AllocateStaging(size_t bytes) = 0;
  // True when the copy engine can read `host_data` directly (pinned), so
  // the value needs no staging copy.
  virtual bool IsPinned(const void* host_data) const { return false; }
  virtual void FreeStaging(void* data) = 0;
  virtual absl::StatusOr<void*> AllocateDevice(size_t bytes) = 0;
  virtual void FreeDevice(void* data) = 0;

  // Starts copying `bytes` from staging to device memory, after every copy
  // started before it.
  virtual absl::Status CopyToDevice(void* device_data, const void* staging_data, size_t bytes) = 0;
  // A fence that completes when every copy started so far is done.
  virtual absl::StatusOr<std::shared_ptr<ReadyFence>> RecordFence() = 0;
  // A fence that completes when the work enqueued so far on `stream` (the
  // trainer's cudaStream_t) is done.
  virtual absl::StatusOr<std::shared_ptr<ReadyFence>> RecordFenceOn(void* stream) = 0;
  // Copies device memory back to the host, after every copy started so far.
  virtual absl::Status CopyToHost(void* host_data, const void* device_data, size_t bytes) = 0;
};

// Plain host memory for CPU replicas.
std::unique_ptr<DeviceBackend> MakeCpuBackend(const Device& device);

// The CUDA backend for `device` (a GPU); FailedPrecondition naming the
// device in a build without CUDA or when the device is missing.
absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeCudaBackend(const Device& device);

// Makes large tensor buffers in this process come from a cache of pinned
// memory, when a GPU is there (else does nothing). Idempotent.
void UsePinnedHostBuffers();

// The backend for any device.
absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeDeviceBackend(const Device& device);

}  // namespace sluice

#endif  // SLUICE_CLIENT_DEVICE_DEVICE_BACKEND_H_
