// Where Tensor's large numeric buffers come from.
//
// Internal to Sluice (not installed): the GPU prefetcher installs a
// pinned-memory cache here, so that batches arriving from the network are
// already where the copy engine can read them.
#ifndef SLUICE_COMMON_LARGE_BUFFER_ALLOCATOR_H_
#define SLUICE_COMMON_LARGE_BUFFER_ALLOCATOR_H_

#include <cstddef>
#include <memory>
#include <thread>
#include <utility>

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

// This thread's allocator of large buffers in place of the process's, for
// as long as the scope lives: a worker's task makes its output where a
// reader on its host can map it (worker/shared_memory_heap.h). Threads that
// a pipeline starts (ThreadPool, prefetch) take their creator's, so every
// step of the task allocates there. A buffer keeps its allocator alive.
class LargeBufferAllocatorScope {
 public:
  explicit LargeBufferAllocatorScope(std::shared_ptr<LargeBufferAllocator> allocator);
  ~LargeBufferAllocatorScope();
  LargeBufferAllocatorScope(const LargeBufferAllocatorScope&) = delete;
  LargeBufferAllocatorScope& operator=(const LargeBufferAllocatorScope&) = delete;

 private:
  std::shared_ptr<LargeBufferAllocator> previous_;
};
// The calling thread's scoped allocator; null outside any scope.
std::shared_ptr<LargeBufferAllocator> ScopedLargeBufferAllocator();

// A thread running `body` that allocates where the calling thread does: how
// ThreadPool and prefetch start theirs, so a task's pipeline stays in its heap.
template <typename Body>
std::thread ThreadInAllocatorScope(Body body) {
  return std::thread([allocator = ScopedLargeBufferAllocator(), body = std::move(body)]() mutable {
    LargeBufferAllocatorScope scope(std::move(allocator));
    body();
  });
}

}  // namespace sluice

#endif  // SLUICE_COMMON_LARGE_BUFFER_ALLOCATOR_H_
