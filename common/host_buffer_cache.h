// Recycles large host tensor buffers. A pipeline makes buffers of the same
// few sizes over and over (a batch of 64 normalized 224x224 images is
// 38.5 MB); glibc serves blocks that large with a fresh mmap each time,
// which the kernel faults in and zeroes page by page: on the image pipeline
// that was a third of the CPU time (bench/README.md). Freed buffers of
// at least kMinCachedBytes wait here, by exact size, for the next buffer of
// that size, up to kMaxCachedBytes in all; past that they go back to the C
// library. It is the default LargeBufferAllocator; an installed one (the
// SDK's pinned memory for GPUs) takes its place.
#ifndef SLUICE_COMMON_HOST_BUFFER_CACHE_H_
#define SLUICE_COMMON_HOST_BUFFER_CACHE_H_

#include <cstddef>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/large_buffer_allocator.h"

namespace sluice {

class HostBufferCache : public LargeBufferAllocator {
 public:
  static constexpr size_t kMinCachedBytes = size_t{1} << 20;
  static constexpr size_t kMaxCachedBytes = size_t{256} << 20;

  explicit HostBufferCache(size_t max_cached_bytes = kMaxCachedBytes) : max_cached_bytes_(max_cached_bytes) {}
  ~HostBufferCache() override;

  // The process's cache; never destroyed, as buffers may outlive main.
  static HostBufferCache& Global();

  size_t min_bytes() const override { return kMinCachedBytes; }
  void* Allocate(size_t bytes) override;
  void Free(void* data, size_t bytes) override;

  size_t cached_bytes() const;
  // A worker with a memory limit keeps a smaller cache (worker_config.cc);
  // buffers past the new cap go back at once.
  void SetMaxCachedBytes(size_t max_cached_bytes);
  // Gives every cached buffer back to the C library. Allocate does this
  // itself, and retries, when an allocation fails.
  void Trim();

 private:
  size_t max_cached_bytes_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex mu_;
  std::multimap<size_t, void*> free_ ABSL_GUARDED_BY(mu_);
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_HOST_BUFFER_CACHE_H_
