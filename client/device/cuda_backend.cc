// The CUDA runtime backend: pinned staging buffers (cudaHostAlloc), device
// buffers (cudaMalloc) and one non-blocking stream per device, so the
// prefetch copies never wait on the trainer's work in the default stream.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/device/device_backend.h"
#include "common/large_buffer_allocator.h"

namespace sluice {
namespace {

absl::Status CudaError(cudaError_t error, const std::string& what, const Device& device) {
  return absl::InternalError(what + " on " + device.name() + " failed: " + cudaGetErrorString(error));
}

class CudaFence : public ReadyFence {
 public:
  CudaFence(Device device, cudaEvent_t event) : device_(std::move(device)), event_(event) {}
  ~CudaFence() override { cudaEventDestroy(event_); }
  absl::Status Wait() override {
    cudaError_t error = cudaEventSynchronize(event_);
    return error == cudaSuccess ? absl::OkStatus()
                                : CudaError(error, "waiting for the prefetch copy", device_);
  }
  absl::Status WaitOnStream(void* stream) override {
    cudaError_t error = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), event_, 0);
    return error == cudaSuccess ? absl::OkStatus() : CudaError(error, "cudaStreamWaitEvent", device_);
  }
  void* native_event() const override { return event_; }

 private:
  const Device device_;
  cudaEvent_t event_;
};

class CudaBackend : public DeviceBackend {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceBackend>> Create(const Device& device) {
    auto backend = std::unique_ptr<CudaBackend>(new CudaBackend(device));
    if (cudaError_t error = cudaSetDevice(device.index); error != cudaSuccess) {
      return CudaError(error, "cudaSetDevice", device);
    }
    if (cudaError_t error = cudaStreamCreateWithFlags(&backend->stream_, cudaStreamNonBlocking);
        error != cudaSuccess) {
      return CudaError(error, "creating the prefetch stream", device);
    }
    return backend;
  }
  ~CudaBackend() override {
    if (stream_ != nullptr) {
      cudaSetDevice(device_.index);
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }

  const Device& device() const override { return device_; }
  bool host_addressable() const override { return false; }

  absl::StatusOr<void*> AllocateStaging(size_t bytes) override {
    void* data = nullptr;
    if (cudaError_t error = cudaHostAlloc(&data, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
        error != cudaSuccess) {
      return CudaError(error, "cudaHostAlloc of " + std::to_string(bytes) + " pinned bytes", device_);
    }
    return data;
  }
  void FreeStaging(void* data) override { cudaFreeHost(data); }

  bool IsPinned(const void* host_data) const override {
    cudaPointerAttributes attributes;
    if (cudaPointerGetAttributes(&attributes, host_data) != cudaSuccess) {
      cudaGetLastError();  // clears the sticky error for plain host memory
      return false;
    }
    return attributes.type == cudaMemoryTypeHost;
  }

  absl::StatusOr<void*> AllocateDevice(size_t bytes) override {
    cudaSetDevice(device_.index);
    void* data = nullptr;
    if (cudaError_t error = cudaMalloc(&data, bytes == 0 ? 1 : bytes); error != cudaSuccess) {
      return CudaError(error, "cudaMalloc of " + std::to_string(bytes) + " bytes", device_);
    }
    return data;
  }
  void FreeDevice(void* data) override {
    cudaSetDevice(device_.index);
    cudaFree(data);
  }

  absl::Status CopyToDevice(void* device_data, const void* staging_data, size_t bytes) override {
    cudaSetDevice(device_.index);
    cudaError_t error = cudaMemcpyAsync(device_data, staging_data, bytes, cudaMemcpyHostToDevice, stream_);
    return error == cudaSuccess ? absl::OkStatus() : CudaError(error, "cudaMemcpyAsync", device_);
  }

  absl::StatusOr<std::shared_ptr<ReadyFence>> RecordFence() override { return RecordFenceOn(stream_); }

  absl::Status CopyToHost(void* host_data, const void* device_data, size_t bytes) override {
    cudaSetDevice(device_.index);
    cudaError_t error = cudaMemcpyAsync(host_data, device_data, bytes, cudaMemcpyDeviceToHost, stream_);
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream_);
    return error == cudaSuccess ? absl::OkStatus() : CudaError(error, "copying back to the host", device_);
  }

  absl::StatusOr<std::shared_ptr<ReadyFence>> RecordFenceOn(void* stream) override {
    cudaSetDevice(device_.index);
    cudaEvent_t event;
    if (cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); error != cudaSuccess) {
      return CudaError(error, "cudaEventCreate", device_);
    }
    if (cudaError_t error = cudaEventRecord(event, static_cast<cudaStream_t>(stream)); error != cudaSuccess) {
      cudaEventDestroy(event);
      return CudaError(error, "cudaEventRecord", device_);
    }
    return std::make_shared<CudaFence>(device_, event);
  }

 private:
  explicit CudaBackend(const Device& device) : device_(device) {}
  const Device device_;
  cudaStream_t stream_ = nullptr;
};

// Pinned host memory for large tensor buffers, cached by size class:
// cudaHostAlloc takes milliseconds, so buffers are reused, not freed.
class PinnedBufferCache : public LargeBufferAllocator {
 public:
  size_t min_bytes() const override { return size_t{1} << 20; }

  void* Allocate(size_t bytes) override {
    const size_t rounded = SizeClass(bytes);
    {
      absl::MutexLock lock(&mu_);
      auto& free_list = free_[rounded];
      if (!free_list.empty()) {
        void* data = free_list.back();
        free_list.pop_back();
        cached_bytes_ -= rounded;
        return data;
      }
    }
    void* data = nullptr;
    if (cudaHostAlloc(&data, rounded, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;  // falls back to pageable memory
    }
    return data;
  }

  void Free(void* data, size_t bytes) override {
    const size_t rounded = SizeClass(bytes);
    {
      absl::MutexLock lock(&mu_);
      if (cached_bytes_ + rounded <= kMaxCachedBytes) {
        free_[rounded].push_back(data);
        cached_bytes_ += rounded;
        return;
      }
    }
    cudaFreeHost(data);
  }

 private:
  static constexpr size_t kMaxCachedBytes = size_t{4} << 30;
  // Quarter steps between powers of two: at most 25% waste, few classes.
  static size_t SizeClass(size_t bytes) {
    size_t power = 1;
    while (power * 2 <= bytes) power *= 2;
    const size_t step = std::max<size_t>(power / 4, 1);
    return (bytes + step - 1) / step * step;
  }

  absl::Mutex mu_;
  std::map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

void UsePinnedHostBuffers() {
  if (NumLocalGpus() == 0) return;
  // Never destroyed: buffers may be freed during static destruction.
  static PinnedBufferCache* cache = new PinnedBufferCache();
  SetLargeBufferAllocator(cache);
}

int NumLocalGpus() {
  int count = 0;
  // No driver or no device is an error here, and means no GPU.
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeCudaBackend(const Device& device) {
  int count = 0;
  if (cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    return absl::FailedPreconditionError(device.name() + " is not available: no usable GPU (" +
                                         cudaGetErrorString(error) + "); CPU replicas work");
  }
  if (device.index >= count) {
    return absl::FailedPreconditionError(device.name() + " is not available: this machine has " +
                                         std::to_string(count) + (count == 1 ? " GPU" : " GPUs"));
  }
  return CudaBackend::Create(device);
}

}  // namespace sluice
