// SharedBufferHeap: where a worker's task allocates its large tensors when
// readers on the worker's host may map them (docs/design.md, "Shared
// memory"). Each buffer is a memfd of its own, sealed against shrinking and
// growing, so that the worker can lend a finished batch to a reader (the
// reader maps the memfd and keeps the tensor as a view of it) instead of
// copying its bytes into the reader's region. One heap per task: a reader
// of the task may see only that task's data in what it maps.
//
// Freed buffers wait, by size in whole pages, for the next buffer of that
// size, as HostBufferCache does, up to bounds per heap (bytes and count) and
// one for all heaps of the process together; past them they go. The process holds at most
// kMaxProcessBuffers buffers (each an open descriptor); past it, and when no
// memfd can be made, tensors come from aligned_alloc (and are copied rather
// than lent).
#ifndef SLUICE_WORKER_SHARED_MEMORY_HEAP_H_
#define SLUICE_WORKER_SHARED_MEMORY_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/host_buffer_cache.h"
#include "common/large_buffer_allocator.h"
#include "service/shared_memory.h"

namespace sluice::worker {

class SharedBufferHeap : public LargeBufferAllocator {
 public:
  // Buffers smaller than this come from aligned_alloc, as with
  // HostBufferCache: a memfd and a mapping each cost system calls.
  static constexpr size_t kMinBytes = size_t{1} << 20;
  static constexpr int64_t kMaxProcessBuffers = 256;
  // Freed buffers one heap keeps, whatever their bytes: each holds one of
  // the process's kMaxProcessBuffers.
  static constexpr size_t kMaxCachedBuffers = 16;

  // What every heap's cached buffers may take together (a worker under a
  // memory limit keeps less: worker_config.cc).
  static void SetProcessCachedBytes(size_t bytes);

  explicit SharedBufferHeap(size_t max_cached_bytes);
  ~SharedBufferHeap() override;
  SharedBufferHeap(const SharedBufferHeap&) = delete;
  SharedBufferHeap& operator=(const SharedBufferHeap&) = delete;

  size_t min_bytes() const override { return kMinBytes; }
  // A cached buffer of exactly `bytes`, or a new memfd; nullptr when no
  // memfd can be made (the tensor then comes from aligned_alloc).
  void* Allocate(size_t bytes) override;
  void Free(void* data, size_t bytes) override;

  // The buffer that [data, data + bytes) lies in, while it is allocated.
  struct Lendable {
    uint64_t id = 0;     // unique in the process, never reused
    int fd = -1;         // the heap's; valid while the buffer is allocated
    int64_t size = 0;    // the memfd's
    int64_t offset = 0;  // of `data` in it
  };
  std::optional<Lendable> Find(const void* data, size_t bytes);

  // Gives back every cached buffer (an allocation failed); those in use stay.
  void Trim();
  // The task's pipeline has ended: gives back the cached buffers, and those
  // freed from now on (buffered elements, leases).
  void StopCaching();

  size_t cached_bytes();
  size_t allocated_buffers();
  static int64_t process_buffer_count();

 private:
  struct Buffer {
    uint64_t id = 0;
    UniqueFd fd;
    size_t size = 0;  // mapped, a whole number of pages
    bool in_use = false;
  };

  // A new sealed memfd of `size` bytes, mapped.
  static std::optional<std::pair<char*, UniqueFd>> Map(size_t size);

  const size_t max_cached_bytes_;
  absl::Mutex mu_;
  std::map<char*, Buffer> buffers_ ABSL_GUARDED_BY(mu_);    // by address, in use or cached
  std::multimap<size_t, char*> free_ ABSL_GUARDED_BY(mu_);  // by size (whole pages)
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool caching_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_SHARED_MEMORY_HEAP_H_
