#include "worker/shared_memory_heap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <utility>

namespace sluice::worker {
namespace {

std::atomic<uint64_t> next_buffer_id{1};
// Across every heap of the process: buffers (each an open memfd), and the
// bytes of freed ones kept for reuse.
std::atomic<int64_t> process_buffers{0};
std::atomic<int64_t> process_cached_bytes{0};
std::atomic<int64_t> max_process_cached_bytes{static_cast<int64_t>(HostBufferCache::kMaxCachedBytes)};

size_t PageRounded(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// Adds `n` to `used` unless that passes `max`.
bool Reserve(std::atomic<int64_t>& used, int64_t n, int64_t max) {
  int64_t now = used.load();
  do {
    if (now + n > max) return false;
  } while (!used.compare_exchange_weak(now, now + n));
  return true;
}

}  // namespace

void SharedBufferHeap::SetProcessCachedBytes(size_t bytes) {
  max_process_cached_bytes.store(static_cast<int64_t>(bytes));
}

SharedBufferHeap::SharedBufferHeap(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}

SharedBufferHeap::~SharedBufferHeap() {
  absl::MutexLock lock(&mu_);
  for (auto& [data, buffer] : buffers_) munmap(data, buffer.size);
  process_buffers -= static_cast<int64_t>(buffers_.size());
  process_cached_bytes -= static_cast<int64_t>(cached_bytes_);
}

void* SharedBufferHeap::Allocate(size_t bytes) {
  const size_t size = PageRounded(bytes);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = free_.find(size); it != free_.end()) {
      char* data = it->second;
      free_.erase(it);
      Buffer& buffer = buffers_.at(data);
      buffer.in_use = true;
      cached_bytes_ -= buffer.size;
      process_cached_bytes -= static_cast<int64_t>(buffer.size);
      return data;
    }
  }
  if (size > static_cast<size_t>(kMaxSharedMemoryBytes)) return nullptr;  // past what a reader maps
  // Each buffer holds a descriptor: past the bound (with this heap's cache
  // given back), tensors come from aligned_alloc (and are copied, not lent).
  if (!Reserve(process_buffers, 1, kMaxProcessBuffers)) {
    Trim();
    if (!Reserve(process_buffers, 1, kMaxProcessBuffers)) return nullptr;
  }
  std::optional<std::pair<char*, UniqueFd>> made = Map(size);
  if (!made.has_value()) {
    Trim();  // the limit (max_memory_bytes) may be what failed: try once more without the cache
    made = Map(size);
  }
  if (!made.has_value()) {
    --process_buffers;
    return nullptr;
  }
  absl::MutexLock lock(&mu_);
  buffers_.emplace(
      made->first,
      Buffer{.id = next_buffer_id.fetch_add(1), .fd = std::move(made->second), .size = size, .in_use = true});
  return made->first;
}

std::optional<std::pair<char*, UniqueFd>> SharedBufferHeap::Map(size_t size) {
  UniqueFd fd(memfd_create("sluice-task-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid() || ftruncate(fd.get(), static_cast<off_t>(size)) != 0 ||
      fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return std::nullopt;
  }
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) return std::nullopt;
  // Only this mapping may write: a reader it is lent to can map it
  // privately or read-only, never write into what other readers get.
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
    munmap(data, size);
    return std::nullopt;
  }
  return std::make_pair(static_cast<char*>(data), std::move(fd));
}

void SharedBufferHeap::Free(void* data, size_t /*bytes*/) {
  absl::MutexLock lock(&mu_);
  auto it = buffers_.find(static_cast<char*>(data));
  if (it == buffers_.end()) return;  // not ours: cannot happen, as only our buffers name us
  Buffer& buffer = it->second;
  buffer.in_use = false;
  if (caching_ && free_.size() < kMaxCachedBuffers && cached_bytes_ + buffer.size <= max_cached_bytes_ &&
      Reserve(process_cached_bytes, static_cast<int64_t>(buffer.size), max_process_cached_bytes.load())) {
    free_.emplace(buffer.size, it->first);
    cached_bytes_ += buffer.size;
    return;
  }
  munmap(it->first, buffer.size);
  buffers_.erase(it);
  --process_buffers;
}

void SharedBufferHeap::StopCaching() {
  {
    absl::MutexLock lock(&mu_);
    caching_ = false;
  }
  Trim();
}

void SharedBufferHeap::Trim() {
  absl::MutexLock lock(&mu_);
  for (const auto& [bytes, data] : free_) {
    auto it = buffers_.find(data);
    munmap(it->first, it->second.size);
    buffers_.erase(it);
    --process_buffers;
  }
  free_.clear();
  process_cached_bytes -= static_cast<int64_t>(cached_bytes_);
  cached_bytes_ = 0;
}

std::optional<SharedBufferHeap::Lendable> SharedBufferHeap::Find(const void* data, size_t bytes) {
  const auto* at = static_cast<const char*>(data);
  absl::MutexLock lock(&mu_);
  auto it = buffers_.upper_bound(const_cast<char*>(at));
  if (it == buffers_.begin()) return std::nullopt;
  --it;
  const Buffer& buffer = it->second;
  const auto offset = static_cast<size_t>(at - it->first);
  if (!buffer.in_use || offset > buffer.size || bytes > buffer.size - offset) return std::nullopt;
  return Lendable{.id = buffer.id,
                  .fd = buffer.fd.get(),
                  .size = static_cast<int64_t>(buffer.size),
                  .offset = static_cast<int64_t>(offset)};
}

size_t SharedBufferHeap::cached_bytes() {
  absl::MutexLock lock(&mu_);
  return cached_bytes_;
}

size_t SharedBufferHeap::allocated_buffers() {
  absl::MutexLock lock(&mu_);
  return buffers_.size() - free_.size();
}

int64_t SharedBufferHeap::process_buffer_count() { return process_buffers.load(); }

}  // namespace sluice::worker
