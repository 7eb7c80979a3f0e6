// SharedMemoryTransport: GetElements from a worker on this host through
// shared memory (service/shared_memory.h, docs/design.md "Shared memory").
// It wraps the worker's gRPC transport, which still carries every request
// and its small answer. On its first request it asks the worker for a
// session; the worker agrees only when the reader's host id is its own.
// The reader then makes a sealed memfd of kSharedMemorySlots regions of
// kInitialSlotBytes, hands it to the worker over its abstract Unix socket,
// and each request takes a free region for its response. A response that
// does not fit (or finds no free region) travels inline; one past the
// regions' size makes the next session's regions large enough for it (a
// power of two, up to kMaxSlotBytes), so that large batches, too, travel
// through memory from then on. A worker that knows shm_resizable does not
// send such a response: it hands out no more than the region holds, and
// when one element alone is past it, answers shared_memory_needed without
// handing it out, so that the reader grows its regions and asks again
// (even a task's first 38.5 MB batch then travels through memory). Asking
// for no more than the region holds is DataLoss naming the worker, and so
// is the same answer to the request over TCP that follows the largest
// regions (element_transport.cc): neither can loop.
//
// A worker that lends (shm_lending) puts a task's large tensors in the
// response as references to its own memory: the reader maps them where
// they are, with no copy on either side (client/read/shared_memory_lent_tensors.h).
//
// Where shared memory cannot be set up although the worker is on this host
// (or the worker is an older one that does not offer it), the reader warns
// once and reads over TCP. A request that fails leaves its region unused,
// since the worker may still write into it; with every region so lost the
// transport opens a fresh session.
#ifndef SLUICE_CLIENT_READ_SHARED_MEMORY_TRANSPORT_H_
#define SLUICE_CLIENT_READ_SHARED_MEMORY_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/read/element_transport.h"
#include "client/read/shared_memory_lent_tensors.h"
#include "service/shared_memory.h"
#include "service/worker_client.h"
#include "sluice/proto/service.grpc.pb.h"

namespace sluice::reader {

inline constexpr int kSharedMemorySlots = 8;
inline constexpr int64_t kInitialSlotBytes = int64_t{4} << 20;
inline constexpr int64_t kMaxSlotBytes = kMaxSharedMemoryBytes / kSharedMemorySlots;
// Regions whose large tensors the reader may keep in place at once (the
// tensors are views of the region, not copies); the others stay free for
// requests in flight, and past it tensors are copied out.
inline constexpr int kMaxHeldSlots = kSharedMemorySlots / 2;

class SharedMemoryTransport : public ElementTransport {
 public:
  SharedMemoryTransport(const std::string& worker_address, std::unique_ptr<ElementTransport> tcp);
  ~SharedMemoryTransport() override;

  absl::Status GetElements(const proto::GetElementsRequest& request, ElementsResponse* response) override;
  FrameSpecs* frame_specs() override { return tcp_->frame_specs(); }

  // Requests answered through shared memory so far.
  int64_t shared_responses();
  // The size of each region of the current (or next) session.
  int64_t slot_bytes();

 private:
  enum class State { kUntried, kShared, kTcp };
  struct SlotReturns;
  class SlotHold;

  // Regions the tensors kept in them gave back: free again, if their session
  // has not ended.
  void TakeBackReturnedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Asks for a session and connects it; decides the state.
  void SetUpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ConnectLocked(const proto::OpenSharedMemoryResponse& offer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives up on shared memory for good, saying why.
  void UseTcpLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The request through shared memory; `depth` counts the times it was asked
  // again in a new session.
  absl::Status GetElementsFrom(const proto::GetElementsRequest& request, ElementsResponse* response,
                               int depth);
  // Regions that hold `needed` bytes of elements for the next session, in
  // place of `session`; false when none can (past kMaxSlotBytes).
  bool GrowLocked(uint64_t session, int64_t needed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the session (the worker sees the socket close).
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string address_;
  const std::unique_ptr<ElementTransport> tcp_;
  WorkerClient worker_;
  // Where regions come back to, for as long as this transport lives.
  const std::shared_ptr<SlotReturns> returns_;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kUntried;
  absl::Time next_try_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;
  std::string secret_ ABSL_GUARDED_BY(mu_);
  // Grows while the worker does not answer OpenSharedMemory.
  absl::Duration retry_after_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  // The session's socket, and the tensors the worker lent over it (a lent
  // tensor keeps it, so the worker keeps the lease, after a session ends).
  std::shared_ptr<LentTensors> lent_ ABSL_GUARDED_BY(mu_);
  // Replaced sessions whose lent tensors are still in use: their leases go
  // back with the current session's requests.
  std::vector<std::weak_ptr<LentTensors>> retired_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<SharedRegion> region_ ABSL_GUARDED_BY(mu_);
  std::vector<int> free_slots_ ABSL_GUARDED_BY(mu_);
  int held_slots_ ABSL_GUARDED_BY(mu_) = 0;
  int lost_slots_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t shared_responses_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t slot_bytes_ ABSL_GUARDED_BY(mu_) = kInitialSlotBytes;
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_SHARED_MEMORY_TRANSPORT_H_
