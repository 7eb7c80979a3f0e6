// LentTensors: a shared-memory reader's side of the tensors a worker lends
// it (GetElementsResponse.lent_tensors; docs/design.md, "Shared memory").
// The worker sends the memfd a lent tensor lies in over the session's
// socket, under the lease's id, just before the response that names the
// lease; the reader maps it and puts a view of it in the element where the
// frame has an empty tensor. When the last view goes, the lease is given
// back with the reader's next request (shm_released), and the worker may
// reuse the memory.
//
// It owns the session's socket: the worker ends a session's leases when the
// socket closes, which must not happen while a tensor is a view of them, so
// every view keeps this object (and the socket) alive.
#ifndef SLUICE_CLIENT_LENT_TENSORS_H_
#define SLUICE_CLIENT_LENT_TENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "service/element_wire.h"
#include "service/shared_memory.h"

namespace sluice {

// How long a response's lent buffers may take to arrive on the socket: the
// worker sent them before the response, so they are normally there.
inline constexpr int kLentBufferTimeoutMs = 5000;

class LentTensors : public std::enable_shared_from_this<LentTensors> {
 public:
  explicit LentTensors(UniqueFd socket, int timeout_ms = kLentBufferTimeoutMs)
      : timeout_ms_(timeout_ms), socket_(std::move(socket)) {}

  // Puts `response`'s lent tensors into its elements, as views of the
  // worker's memory; DataLoss naming the worker and what is wrong when one
  // does not fit its element or its buffer, or its buffer does not come.
  absl::Status Place(ElementsResponse* response, const std::string& worker);

  // Leases whose tensors are gone since the last call, for the next request.
  std::vector<uint64_t> TakeReleased();
  // Leases a request failed to give back, for the next one (the worker
  // ignores a lease it no longer has).
  void GiveBackLater(const std::vector<uint64_t>& leases);

  // Leases whose tensors are still in use (tests).
  int64_t held();

 private:
  class View;

  // The buffer lent under `lease`, mapped; receives from the socket until
  // it comes.
  absl::StatusOr<std::pair<std::shared_ptr<SharedRegion>, int64_t>> Map(uint64_t lease);
  void Released(uint64_t lease);

  const int timeout_ms_;
  absl::Mutex mu_;
  UniqueFd socket_ ABSL_GUARDED_BY(mu_);
  // Arrived, not yet claimed: lease -> (memfd, size), oldest first.
  std::map<uint64_t, std::pair<UniqueFd, int64_t>> arrived_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> released_ ABSL_GUARDED_BY(mu_);
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_LENT_TENSORS_H_
