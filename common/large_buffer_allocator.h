// Where Tensor's large numeric buffers come from.
//
// Internal to Sluice (not installed): the GPU prefetcher installs a
// pinned-memory cache here, so that batches arriving from the network are
// already where the copy engine can read them.
#ifndef SLUICE_COMMON_LARGE_BUFFER_ALLOCATOR_H_
#define SLUICE_COMMON_LARGE_BUFFER_ALLOCATOR_H_

#include <cstddef>

namespace sluice {

// The allocator of large numeric buffers, when not aligned_alloc.
class LargeBufferAllocator {
 public:
  virtual ~LargeBufferAllocator() = default;
  // Buffers of fewer bytes come from aligned_alloc.
  virtual size_t min_bytes() const = 0;
  // nullptr to fall back to aligned_alloc.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* data, size_t bytes) = 0;
};
// Process-wide; `allocator` must live until the process ends. nullptr
// restores aligned_alloc for later buffers.
void SetLargeBufferAllocator(LargeBufferAllocator* allocator);

}  // namespace sluice

#endif  // SLUICE_COMMON_LARGE_BUFFER_ALLOCATOR_H_
