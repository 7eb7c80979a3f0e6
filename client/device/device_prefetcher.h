// The engine behind DistributedIterator: a background thread that turns
// host steps (one Element per replica) into per-replica values in device
// memory, `depth` steps ahead of the trainer.
//
// Per replica and step it packs the components into one pooled staging
// buffer and copies that into one pooled device buffer, in chunks, so the
// packing of one chunk overlaps the DMA of the one before. Buffers come
// from bounded per-device pools: a device pool holds depth + 2 buffers
// (the ready steps, the one being filled, and the one the trainer is
// using), so device memory stays within (depth + 2) x the largest
// per-replica batch, and a trainer that holds on to more values holds the
// producer back. Buffers only grow, so a warm iterator allocates nothing.
#ifndef SLUICE_CLIENT_DEVICE_DEVICE_PREFETCHER_H_
#define SLUICE_CLIENT_DEVICE_DEVICE_PREFETCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/device/device_backend.h"
#include "common/thread_pool.h"
#include "sluice/distribute.h"

namespace sluice {

class BufferPool;

class DevicePrefetcher {
 public:
  // Fills `per_replica` with the next step's host values, one per backend,
  // or sets *end_of_input. Called on the prefetch thread only.
  using StepSource = std::function<absl::Status(std::vector<Element>* per_replica, bool* end_of_input)>;

  // Bytes per DMA chunk: large enough that a copy's fixed cost vanishes,
  // small enough that packing the next chunk overlaps it.
  static constexpr size_t kChunkBytes = size_t{4} << 20;

  // `packing_threads` host threads pack each batch into staging memory;
  // 0 picks a quarter of the cores, between 1 and 4.
  DevicePrefetcher(std::vector<std::shared_ptr<DeviceBackend>> backends, StepSource source, int depth,
                   int packing_threads = 1);
  // Stops the thread after the step it is on; copies in flight finish
  // before their buffers are freed. Values the trainer holds stay valid.
  ~DevicePrefetcher();
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  // The next step, an error the input had at that step, or OutOfRange at
  // the end. ResourceExhausted when the producer cannot go on because the
  // trainer holds every buffer of a device.
  absl::StatusOr<PerReplica> GetNext();
  // How many steps (values or errors) GetNext has handed out.
  int64_t steps_taken() const {
    absl::MutexLock lock(&mu_);
    return steps_taken_;
  }

  struct Counters {
    int64_t staging_allocations = 0;
    int64_t device_allocations = 0;
    int64_t steps_produced = 0;
  };
  Counters counters() const;

 private:
  void ProduceLoop();
  // One replica's value from its host element.
  absl::StatusOr<ReplicaValue> CopyToReplica(size_t replica, const Element& element);
  bool Cancelled() const;
  // memcpy, split across the packing threads when it is large.
  void PackCopy(char* destination, const char* source, size_t bytes);

  const std::vector<std::shared_ptr<DeviceBackend>> backends_;
  const StepSource source_;
  const size_t depth_;
  std::vector<std::shared_ptr<BufferPool>> staging_pools_;
  std::vector<std::shared_ptr<BufferPool>> device_pools_;
  std::unique_ptr<ThreadPool> packers_;  // null: the producer packs alone

  mutable absl::Mutex mu_;
  std::deque<absl::StatusOr<PerReplica>> ready_ ABSL_GUARDED_BY(mu_);
  bool producer_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int64_t steps_produced_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_taken_ ABSL_GUARDED_BY(mu_) = 0;
  // The device pool the producer is waiting on, if any: GetNext reports a
  // trainer that holds every buffer instead of waiting forever.
  BufferPool* blocked_pool_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread producer_;
};

// A bounded pool of buffers from one backend, of one kind. Buffers return
// with the fence of their last copy; a buffer is handed out again only
// once that fence completes. Shared: values keep it (and its backend)
// alive after the prefetcher is gone.
class BufferPool {
 public:
  enum class Kind { kStaging, kDevice };
  BufferPool(std::shared_ptr<DeviceBackend> backend, Kind kind, size_t capacity);
  ~BufferPool();

  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
    std::shared_ptr<ReadyFence> last_use;  // complete before reuse
  };
  // A buffer of at least `bytes`, waiting while all `capacity` are out.
  // Cancelled when Cancel() is called while waiting.
  absl::StatusOr<Buffer> Acquire(size_t bytes);
  void Release(Buffer buffer);
  // Wakes waiters with Cancelled and frees buffers as they come back.
  void Cancel();
  // True when every buffer is out and an Acquire waits for one.
  bool exhausted() const;
  int64_t allocations() const;
  size_t capacity() const { return capacity_; }
  const Device& device() const { return backend_->device(); }

 private:
  // Frees after the buffer's last use.
  void Free(Buffer& buffer);

  const std::shared_ptr<DeviceBackend> backend_;
  const Kind kind_;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::vector<Buffer> free_ ABSL_GUARDED_BY(mu_);
  size_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  // Acquire calls waiting for a buffer.
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int64_t allocations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_DEVICE_DEVICE_PREFETCHER_H_
