#include "worker/shared_buffer_heap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <utility>

namespace sluice::worker {
namespace {

std::atomic<uint64_t> next_buffer_id{1};

size_t PageRounded(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

SharedBufferHeap::SharedBufferHeap(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}

SharedBufferHeap::~SharedBufferHeap() {
  absl::MutexLock lock(&mu_);
  for (auto& [data, buffer] : buffers_) munmap(data, buffer.size);
}

void* SharedBufferHeap::Allocate(size_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = free_.find(bytes); it != free_.end()) {
      char* data = it->second;
      free_.erase(it);
      Buffer& buffer = buffers_.at(data);
      buffer.in_use = true;
      cached_bytes_ -= buffer.size;
      return data;
    }
  }
  const size_t size = PageRounded(bytes);
  if (size > static_cast<size_t>(kMaxSharedMemoryBytes)) return nullptr;  // past what a reader maps
  UniqueFd fd(memfd_create("sluice-task-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid() || ftruncate(fd.get(), static_cast<off_t>(size)) != 0 ||
      fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return nullptr;
  }
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) return nullptr;
  // Only this mapping may write: a reader it is lent to can map it
  // privately or read-only, never write into what other readers get.
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
    munmap(data, size);
    return nullptr;
  }
  absl::MutexLock lock(&mu_);
  buffers_.emplace(
      static_cast<char*>(data),
      Buffer{.id = next_buffer_id.fetch_add(1), .fd = std::move(fd), .size = size, .in_use = true});
  return data;
}

void SharedBufferHeap::Free(void* data, size_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = buffers_.find(static_cast<char*>(data));
  if (it == buffers_.end()) return;  // not ours: cannot happen, as only our buffers name us
  Buffer& buffer = it->second;
  buffer.in_use = false;
  if (cached_bytes_ + buffer.size <= max_cached_bytes_) {
    free_.emplace(bytes, it->first);
    cached_bytes_ += buffer.size;
    return;
  }
  munmap(it->first, buffer.size);
  buffers_.erase(it);
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

}  // namespace sluice::worker
