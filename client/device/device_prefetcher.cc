#include "client/device/device_prefetcher.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/synchronization/blocking_counter.h"
#include "client/device/device_tensor_state.h"

namespace sluice {

namespace {

// Complete when every fence in it is: the last use of a buffer that several
// streams read.
struct AllFences : ReadyFence {
  absl::Status Wait() override {
    for (const auto& fence : fences) {
      if (absl::Status status = fence->Wait(); !status.ok()) return status;
    }
    return absl::OkStatus();
  }
  absl::Status WaitOnStream(void* stream) override {
    for (const auto& fence : fences) {
      if (absl::Status status = fence->WaitOnStream(stream); !status.ok()) return status;
    }
    return absl::OkStatus();
  }
  void* native_event() const override { return nullptr; }
  std::vector<std::shared_ptr<ReadyFence>> fences;
};

}  // namespace

namespace internal {

// The device buffer of one replica value, back to its pool when the last
// tensor, DLPack view or host Tensor over it is dropped. Streams recorded
// by the trainer become the buffer's last-use fence.
class BufferUse {
 public:
  BufferUse(std::shared_ptr<BufferPool> pool, std::shared_ptr<DeviceBackend> backend,
            BufferPool::Buffer buffer)
      : pool_(std::move(pool)), backend_(std::move(backend)), buffer_(std::move(buffer)) {}
  ~BufferUse() {
    absl::MutexLock lock(&mu_);
    // Only a value dropped before its copy finished waits here.
    if (!sources_.empty()) copied_->Wait().IgnoreError();
    if (!streams_.empty()) {
      auto fences = std::make_shared<AllFences>();
      if (buffer_.last_use != nullptr) fences->fences.push_back(buffer_.last_use);
      for (void* stream : streams_) {
        absl::StatusOr<std::shared_ptr<ReadyFence>> fence = backend_->RecordFenceOn(stream);
        if (fence.ok()) fences->fences.push_back(*std::move(fence));
      }
      buffer_.last_use = std::move(fences);
    }
    pool_->Release(std::move(buffer_));
  }
  // The pinned host tensors a direct DMA reads: they must outlive it.
  void KeepUntilCopied(std::vector<Tensor> sources, std::shared_ptr<ReadyFence> copied) {
    absl::MutexLock lock(&mu_);
    sources_ = std::move(sources);
    copied_ = std::move(copied);
  }
  void RecordStream(void* stream) {
    absl::MutexLock lock(&mu_);
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
  }
  void* data() const { return buffer_.data; }

 private:
  const std::shared_ptr<BufferPool> pool_;
  const std::shared_ptr<DeviceBackend> backend_;
  absl::Mutex mu_;
  BufferPool::Buffer buffer_;
  std::vector<void*> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<Tensor> sources_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ReadyFence> copied_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal

absl::Status ReplicaValue::WaitOnStream(void* stream) const {
  if (ready == nullptr) return absl::OkStatus();
  if (absl::Status status = ready->WaitOnStream(stream); !status.ok()) return status;
  return RecordStream(stream);
}

absl::Status ReplicaValue::RecordStream(void* stream) const {
  if (buffer_use != nullptr && device.kind == DeviceKind::kGpu) buffer_use->RecordStream(stream);
  return absl::OkStatus();
}

BufferPool::BufferPool(std::shared_ptr<DeviceBackend> backend, Kind kind, size_t capacity)
    : backend_(std::move(backend)), kind_(kind), capacity_(capacity) {}

BufferPool::~BufferPool() {
  for (Buffer& buffer : free_) Free(buffer);
}

absl::StatusOr<BufferPool::Buffer> BufferPool::Acquire(size_t bytes) {
  Buffer buffer;
  {
    absl::MutexLock lock(&mu_);
    auto can_go_on = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return cancelled_ || !free_.empty() || outstanding_ < capacity_;
    };
    ++waiters_;
    mu_.Await(absl::Condition(&can_go_on));
    --waiters_;
    if (cancelled_) return absl::CancelledError("the iterator is shutting down");
    ++outstanding_;
    if (!free_.empty()) {
      // The smallest buffer that fits, else the largest, to regrow.
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        const bool fits = it->bytes >= bytes;
        if (best == free_.end() || (fits && (best->bytes < bytes || it->bytes < best->bytes)) ||
            (!fits && best->bytes < bytes && it->bytes > best->bytes)) {
          best = it;
        }
      }
      buffer = std::move(*best);
      free_.erase(best);
    }
  }
  // Off the lock: fences and allocations can take milliseconds.
  if (buffer.last_use != nullptr) {
    absl::Status status = buffer.last_use->Wait();
    buffer.last_use = nullptr;
    if (!status.ok()) {
      Release(std::move(buffer));
      return status;
    }
  }
  if (buffer.data != nullptr && buffer.bytes >= bytes) return buffer;
  const size_t old_bytes = buffer.bytes;
  if (buffer.data != nullptr) Free(buffer);  // too small
  // Grow by at least a quarter, rounded to 64 KiB, so that batches of
  // slowly growing sizes do not reallocate at every step.
  constexpr size_t kGranule = size_t{64} << 10;
  size_t want = std::max(bytes, old_bytes + old_bytes / 4);
  want = (want + kGranule - 1) / kGranule * kGranule;
  absl::StatusOr<void*> data =
      kind_ == Kind::kStaging ? backend_->AllocateStaging(want) : backend_->AllocateDevice(want);
  absl::MutexLock lock(&mu_);
  if (!data.ok()) {
    --outstanding_;
    return data.status();
  }
  ++allocations_;
  return Buffer{*data, want, nullptr};
}

void BufferPool::Release(Buffer buffer) {
  {
    absl::MutexLock lock(&mu_);
    --outstanding_;
    if (buffer.data == nullptr) return;
    if (!cancelled_) {
      free_.push_back(std::move(buffer));
      return;
    }
  }
  // The iterator is gone: nobody will ask for this buffer again.
  Free(buffer);
}

void BufferPool::Free(Buffer& buffer) {
  if (buffer.last_use != nullptr) buffer.last_use->Wait().IgnoreError();
  if (kind_ == Kind::kStaging) {
    backend_->FreeStaging(buffer.data);
  } else {
    backend_->FreeDevice(buffer.data);
  }
}

void BufferPool::Cancel() {
  std::vector<Buffer> unused;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    unused.swap(free_);
  }
  for (Buffer& buffer : unused) Free(buffer);
}

bool BufferPool::exhausted() const {
  absl::MutexLock lock(&mu_);
  // Someone waits in Acquire: outstanding_ alone also counts the buffer an
  // Acquire has just taken, before its caller says it no longer waits.
  return waiters_ > 0 && free_.empty() && outstanding_ >= capacity_;
}

int64_t BufferPool::allocations() const {
  absl::MutexLock lock(&mu_);
  return allocations_;
}

namespace {

// Device-side alignment of each component: what cudaMalloc guarantees and
// vectorized kernels expect.
constexpr size_t kComponentAlignment = 256;

size_t AlignUp(size_t offset) {
  return (offset + kComponentAlignment - 1) / kComponentAlignment * kComponentAlignment;
}

}  // namespace

DevicePrefetcher::DevicePrefetcher(std::vector<std::shared_ptr<DeviceBackend>> backends, StepSource source,
                                   int depth, int packing_threads)
    : backends_(std::move(backends)), source_(std::move(source)), depth_(std::max(depth, 1)) {
  const bool needs_staging = std::any_of(backends_.begin(), backends_.end(),
                                         [](const auto& backend) { return !backend->host_addressable(); });
  if (packing_threads == 0) {
    packing_threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 4, 1, 4);
  }
  // The producer packs one slice itself.
  if (needs_staging && packing_threads > 1) packers_ = std::make_unique<ThreadPool>(packing_threads - 1);
  for (const std::shared_ptr<DeviceBackend>& backend : backends_) {
    // Two staging buffers: one being packed while the other's DMA runs.
    staging_pools_.push_back(std::make_shared<BufferPool>(backend, BufferPool::Kind::kStaging, 2));
    device_pools_.push_back(std::make_shared<BufferPool>(backend, BufferPool::Kind::kDevice, depth_ + 2));
  }
  producer_ = std::thread([this] { ProduceLoop(); });
}

DevicePrefetcher::~DevicePrefetcher() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }
  for (auto& pool : staging_pools_) pool->Cancel();
  for (auto& pool : device_pools_) pool->Cancel();
  producer_.join();
}

bool DevicePrefetcher::Cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

void DevicePrefetcher::ProduceLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto room = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancelled_ || ready_.size() < depth_; };
      mu_.Await(absl::Condition(&room));
      if (cancelled_) break;
    }
    std::vector<Element> step;
    bool end_of_input = false;
    absl::Status status = source_(&step, &end_of_input);
    if (status.ok() && end_of_input) break;
    if (status.ok() && step.size() != backends_.size()) {
      status = absl::InternalError("a step has " + std::to_string(step.size()) + " values for " +
                                   std::to_string(backends_.size()) + " replicas");
    }
    std::vector<ReplicaValue> values;
    for (size_t replica = 0; status.ok() && replica < step.size(); ++replica) {
      absl::StatusOr<ReplicaValue> value = CopyToReplica(replica, step[replica]);
      if (value.ok()) {
        values.push_back(*std::move(value));
      } else {
        status = value.status();
      }
    }
    if (Cancelled()) break;
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      ready_.push_back(PerReplica(std::move(values)));
      ++steps_produced_;
    } else {
      ready_.push_back(status);
    }
  }
  absl::MutexLock lock(&mu_);
  producer_done_ = true;
}

absl::StatusOr<ReplicaValue> DevicePrefetcher::CopyToReplica(size_t replica, const Element& element) {
  DeviceBackend& backend = *backends_[replica];
  const Device& device = backend.device();
  std::vector<size_t> offsets(element.components.size(), 0);
  size_t total = 0;
  for (size_t i = 0; i < element.components.size(); ++i) {
    const Tensor& tensor = element.components[i];
    if (tensor.dtype() == DType::kString) {
      if (!backend.host_addressable()) {
        return absl::InvalidArgumentError("component " + std::to_string(i) + " is a string tensor; " +
                                          device.name() + " takes numeric tensors only");
      }
      continue;
    }
    offsets[i] = AlignUp(total);
    total = offsets[i] + tensor.ByteSize();
  }

  ReplicaValue value;
  value.device = device;
  value.names = element.names;
  std::shared_ptr<internal::BufferUse> use;
  if (total > 0) {
    {
      absl::MutexLock lock(&mu_);
      blocked_pool_ = device_pools_[replica].get();
    }
    absl::StatusOr<BufferPool::Buffer> device_buffer = device_pools_[replica]->Acquire(total);
    {
      absl::MutexLock lock(&mu_);
      blocked_pool_ = nullptr;
    }
    if (!device_buffer.ok()) return device_buffer.status();
    use = std::make_shared<internal::BufferUse>(device_pools_[replica], backends_[replica],
                                                *std::move(device_buffer));
    char* device_data = static_cast<char*>(use->data());
    if (backend.host_addressable()) {
      for (size_t i = 0; i < element.components.size(); ++i) {
        const Tensor& tensor = element.components[i];
        if (tensor.dtype() != DType::kString)
          std::memcpy(device_data + offsets[i], tensor.raw_data(), tensor.ByteSize());
      }
    } else {
      // Components already in pinned memory (the pinned buffer cache put
      // them there as they arrived) go straight to the device; the rest
      // are packed into staging in pieces of at most kChunkBytes, each
      // piece's DMA starting as soon as it is packed, so packing overlaps
      // the copy engine.
      std::vector<bool> direct(element.components.size(), false);
      size_t staged_bytes = 0;
      for (size_t i = 0; i < element.components.size(); ++i) {
        const Tensor& tensor = element.components[i];
        if (tensor.dtype() == DType::kString || tensor.ByteSize() == 0) continue;
        direct[i] = backend.IsPinned(tensor.raw_data());
        if (!direct[i]) staged_bytes += tensor.ByteSize();
      }
      std::optional<BufferPool::Buffer> staging;
      if (staged_bytes > 0) {
        absl::StatusOr<BufferPool::Buffer> acquired = staging_pools_[replica]->Acquire(total);
        if (!acquired.ok()) return acquired.status();
        staging = *std::move(acquired);
      }
      char* staging_data = staging ? static_cast<char*>(staging->data) : nullptr;
      absl::Status status;
      size_t pending_begin = 0;  // staged bytes [pending_begin, pending_end) not sent yet
      size_t pending_end = 0;
      auto send_pending = [&] {
        if (status.ok() && pending_end > pending_begin) {
          status = backend.CopyToDevice(device_data + pending_begin, staging_data + pending_begin,
                                        pending_end - pending_begin);
        }
        pending_begin = pending_end;
      };
      std::vector<Tensor> sources;
      for (size_t i = 0; i < element.components.size() && status.ok(); ++i) {
        const Tensor& tensor = element.components[i];
        if (tensor.dtype() == DType::kString || tensor.ByteSize() == 0) continue;
        const size_t bytes = tensor.ByteSize();
        if (direct[i]) {
          status = backend.CopyToDevice(device_data + offsets[i], tensor.raw_data(), bytes);
          sources.push_back(tensor);
          continue;
        }
        if (pending_end == pending_begin) pending_begin = offsets[i];
        const char* source = static_cast<const char*>(tensor.raw_data());
        for (size_t done = 0; done < bytes && status.ok();) {
          const size_t piece = std::min(kChunkBytes, bytes - done);
          PackCopy(staging_data + offsets[i] + done, source + done, piece);
          done += piece;
          pending_end = offsets[i] + done;
          if (pending_end - pending_begin >= kChunkBytes) send_pending();
        }
      }
      send_pending();
      absl::StatusOr<std::shared_ptr<ReadyFence>> fence =
          status.ok() ? backend.RecordFence() : absl::StatusOr<std::shared_ptr<ReadyFence>>(status);
      if (!fence.ok()) {
        // The copies may still be running: wait for the stream before the
        // buffers go back.
        if (auto drained = backend.RecordFence(); drained.ok()) (*drained)->Wait().IgnoreError();
        if (staging) staging_pools_[replica]->Release(*std::move(staging));
        return fence.status();
      }
      if (staging) {
        staging->last_use = *fence;
        staging_pools_[replica]->Release(*std::move(staging));
      }
      value.ready = *fence;
      use->KeepUntilCopied(std::move(sources), *fence);
    }
  }
  if (value.ready == nullptr) {
    absl::StatusOr<std::shared_ptr<ReadyFence>> fence = backend.RecordFence();
    if (!fence.ok()) return fence.status();
    value.ready = *std::move(fence);
  }
  value.buffer_use = use;

  for (size_t i = 0; i < element.components.size(); ++i) {
    const Tensor& tensor = element.components[i];
    internal::DeviceTensorState out;
    out.dtype = tensor.dtype();
    out.shape = tensor.shape();
    out.device = device;
    if (tensor.dtype() == DType::kString) {
      out.host = tensor;
    } else if (use == nullptr) {
      out.host = Tensor(tensor.dtype(), tensor.shape());  // no bytes at all
    } else {
      out.byte_size = tensor.ByteSize();
      out.data = static_cast<char*>(use->data()) + offsets[i];
      out.lease = std::shared_ptr<void>(use, out.data);
      if (backend.host_addressable()) {
        auto buffer =
            TensorBuffer::Wrap(tensor.dtype(), tensor.num_elements(), out.data, [lease = out.lease] {});
        out.host = Tensor::FromBuffer(tensor.dtype(), tensor.shape(), std::move(buffer));
      } else {
        out.backend = backends_[replica];
      }
    }
    value.components.push_back(internal::DeviceTensorAccess::Make(std::move(out)));
  }
  return value;
}

absl::StatusOr<PerReplica> DevicePrefetcher::GetNext() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !ready_.empty() || producer_done_ || (blocked_pool_ != nullptr && blocked_pool_->exhausted());
  };
  // The producer blocks in its pool's Acquire without touching mu_, so
  // exhaustion is looked for again every 10 ms.
  while (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(10))) {
  }
  if (!ready_.empty()) {
    absl::StatusOr<PerReplica> step = std::move(ready_.front());
    ready_.pop_front();
    ++steps_taken_;
    return step;
  }
  if (producer_done_) return absl::OutOfRangeError("end of input");
  return absl::ResourceExhaustedError(
      "the trainer holds all " + std::to_string(blocked_pool_->capacity()) + " prefetch buffers of " +
      blocked_pool_->device().name() +
      " (prefetch_buffer_size + 2); drop earlier values before asking for more");
}

void DevicePrefetcher::PackCopy(char* destination, const char* source, size_t bytes) {
  // Below a few MiB one thread is as fast as the handoff costs.
  constexpr size_t kMinSlice = size_t{1} << 20;
  const size_t slices =
      packers_ == nullptr ? 1 : std::min<size_t>(packers_->num_threads() + 1, bytes / kMinSlice);
  if (slices <= 1) {
    std::memcpy(destination, source, bytes);
    return;
  }
  const size_t slice = (bytes + slices - 1) / slices;
  absl::BlockingCounter pending(static_cast<int>(slices - 1));
  for (size_t k = 1; k < slices; ++k) {
    const size_t begin = k * slice;
    const size_t length = std::min(bytes, begin + slice) - begin;
    packers_->Schedule([&pending, destination, source, begin, length] {
      std::memcpy(destination + begin, source + begin, length);
      pending.DecrementCount();
    });
  }
  std::memcpy(destination, source, std::min(slice, bytes));
  pending.Wait();
}

DevicePrefetcher::Counters DevicePrefetcher::counters() const {
  Counters counters;
  for (const auto& pool : staging_pools_) counters.staging_allocations += pool->allocations();
  for (const auto& pool : device_pools_) counters.device_allocations += pool->allocations();
  absl::MutexLock lock(&mu_);
  counters.steps_produced = steps_produced_;
  return counters;
}

}  // namespace sluice
