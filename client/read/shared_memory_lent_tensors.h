// LentTensors: a shared-memory reader's side of the tensors a worker lends
// it (GetElementsResponse.lent_tensors; docs/design.md, "Lent tensors").
// The worker sends the memfd a lent tensor lies in over the session's
// socket, under the lease's id, just before the response that names the
// lease; the reader maps the tensor's pages privately and puts a view of
// them in the element where the frame has an empty tensor. When the last
// view goes, the lease is given back with the reader's next request
// (shm_released, or shm_released_elsewhere once the session is replaced),
// and the worker may reuse the memory.
//
// It owns the session's socket: the worker ends a session's leases when the
// socket closes, which must not happen while a tensor is a view of them, so
// every view keeps this object (and the socket) alive.
#ifndef SLUICE_CLIENT_READ_SHARED_MEMORY_LENT_TENSORS_H_
#define SLUICE_CLIENT_READ_SHARED_MEMORY_LENT_TENSORS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "service/element_wire.h"
#include "service/shared_memory.h"

namespace sluice::reader {

// How long a response's lent buffers may take to arrive on the socket: the
// worker sent them before the response, so they are normally there.
inline constexpr int kLentBufferTimeoutMs = 5000;
// A memfd no response has claimed for this long belongs to a response that
// was lost on the way (past GetElements' 30 s deadline): its lease goes back.
inline constexpr std::chrono::seconds kUnclaimedLentBufferLifetime{60};

class LentTensors : public std::enable_shared_from_this<LentTensors> {
 public:
  LentTensors(UniqueFd socket, uint64_t session, std::string secret, int timeout_ms = kLentBufferTimeoutMs)
      : session_(session), secret_(std::move(secret)), timeout_ms_(timeout_ms), socket_(std::move(socket)) {}

  uint64_t session() const { return session_; }
  const std::string& secret() const { return secret_; }

  // Puts `response`'s lent tensors into its elements, as views of the
  // worker's memory; DataLoss naming the worker and what is wrong when one
  // does not fit its element or its buffer, or its buffer does not come.
  absl::Status Place(ElementsResponse* response, const std::string& worker);
  // Gives back the leases of a response that will not be placed (it failed
  // on the way), closing their memfds as they arrive; `received`, the one
  // whose memfd was already taken off the socket, is not waited for.
  void Discard(const std::vector<proto::LentTensor>& lent, uint64_t received = 0);

  // Leases whose tensors are gone since the last call, for the next request.
  std::vector<uint64_t> TakeReleased();
  // Leases a request failed to give back, for the next one (the worker
  // ignores a lease it no longer has).
  void GiveBackLater(const std::vector<uint64_t>& leases);

  // Leases whose tensors are still in use (tests).
  int64_t held();

 private:
  class View;
  struct Arrived {
    UniqueFd memfd;
    int64_t size = 0;
    std::chrono::steady_clock::time_point when;
  };

  // The memfd lent under `lease`, received from the socket if it has not
  // come yet (other leases' memfds on the way are kept for theirs).
  absl::StatusOr<Arrived> Receive(uint64_t lease);
  // Keeps a memfd that arrived, unless its response was discarded; gives
  // back the leases of memfds nobody claimed for too long.
  void KeepLocked(uint64_t lease, Arrived arrived) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Released(uint64_t lease);

  const uint64_t session_;
  const std::string secret_;
  const int timeout_ms_;
  // Held while reading from the socket, never while waiting for mu_'s
  // holders: dropping a tensor (Released) never waits on the socket.
  absl::Mutex socket_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  const UniqueFd socket_;
  absl::Mutex mu_;
  std::map<uint64_t, Arrived> arrived_ ABSL_GUARDED_BY(mu_);  // not yet claimed
  std::set<uint64_t> discarded_ ABSL_GUARDED_BY(mu_);         // memfds to close on arrival
  std::vector<uint64_t> released_ ABSL_GUARDED_BY(mu_);
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_SHARED_MEMORY_LENT_TENSORS_H_
