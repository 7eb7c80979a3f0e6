#include "common/host_buffer_cache.h"

#include <cstdlib>
#include <iterator>

#include "sluice/tensor.h"

namespace sluice {
namespace {

size_t Rounded(size_t bytes) { return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }

}  // namespace

HostBufferCache::~HostBufferCache() {
  absl::MutexLock lock(&mu_);
  for (auto& [size, data] : free_) std::free(data);
}

HostBufferCache& HostBufferCache::Global() {
  static auto* cache = new HostBufferCache();
  return *cache;
}

void* HostBufferCache::Allocate(size_t bytes) {
  const size_t rounded = Rounded(bytes);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = free_.find(rounded); it != free_.end()) {
      void* data = it->second;
      free_.erase(it);
      cached_bytes_ -= rounded;
      return data;
    }
  }
  if (void* data = std::aligned_alloc(kBufferAlignment, rounded); data != nullptr) return data;
  // Out of memory (or of address space, under a worker's limit): what the
  // cache holds is the first thing to give up.
  Trim();
  return std::aligned_alloc(kBufferAlignment, rounded);
}

void HostBufferCache::SetMaxCachedBytes(size_t max_cached_bytes) {
  absl::MutexLock lock(&mu_);
  max_cached_bytes_ = max_cached_bytes;
  while (cached_bytes_ > max_cached_bytes_ && !free_.empty()) {
    auto largest = std::prev(free_.end());
    cached_bytes_ -= largest->first;
    std::free(largest->second);
    free_.erase(largest);
  }
}

void HostBufferCache::Trim() {
  absl::MutexLock lock(&mu_);
  for (auto& [size, data] : free_) std::free(data);
  free_.clear();
  cached_bytes_ = 0;
}

void HostBufferCache::Free(void* data, size_t bytes) {
  const size_t rounded = Rounded(bytes);
  {
    absl::MutexLock lock(&mu_);
    if (cached_bytes_ + rounded <= max_cached_bytes_ && max_cached_bytes_ > 0) {
      free_.emplace(rounded, data);
      cached_bytes_ += rounded;
      return;
    }
  }
  std::free(data);
}

size_t HostBufferCache::cached_bytes() const {
  absl::MutexLock lock(&mu_);
  return cached_bytes_;
}

}  // namespace sluice
