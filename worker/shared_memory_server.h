// SharedMemoryServer: the worker's side of shared memory with readers on
// its host (service/shared_memory.h, docs/design.md "Shared memory").
// OpenSharedMemory offers a session (an id and a secret) to a reader whose
// host id is the worker's; the reader connects to the worker's abstract
// Unix socket and sends the session's hello with its sealed memfd. One
// thread accepts those, waits for their hellos, and watches every
// session's socket: a session ends
// when its reader hangs up or dies, and its mapping goes once no response
// is being written into it.
//
// Sessions live only in memory: a restarted worker has none, and readers
// whose requests name an unknown session go back to TCP.
#ifndef SLUICE_WORKER_SHARED_MEMORY_SERVER_H_
#define SLUICE_WORKER_SHARED_MEMORY_SERVER_H_

#include <grpcpp/support/byte_buffer.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/shared_memory.h"
#include "sluice/element.h"
#include "sluice/proto/service.pb.h"
#include "worker/shared_memory_heap.h"

namespace sluice::worker {

// Sessions open at once, offered or connected.
inline constexpr int kMaxSharedMemorySessions = 256;
// How long an offer waits for its reader to connect.
inline constexpr absl::Duration kSharedMemoryOfferLifetime = absl::Seconds(30);
// Offers not yet taken up, per client (tenant): a reader connects at once,
// so more are calls that would only crowd the others out of the sessions.
inline constexpr int kMaxPendingSharedMemoryOffersPerClient = 16;

class SharedMemoryServer {
 public:
  // Listens on a fresh abstract socket; the error says why it cannot (the
  // worker then refuses OpenSharedMemory with it, and readers use TCP).
  // Sessions together map at most `max_mapped_bytes`, and the tensors lent
  // to them count too: the mappings count against the worker's
  // address-space limit (max_memory_bytes).
  static absl::StatusOr<std::unique_ptr<SharedMemoryServer>> Start(int64_t max_mapped_bytes);
  ~SharedMemoryServer();
  SharedMemoryServer(const SharedMemoryServer&) = delete;
  SharedMemoryServer& operator=(const SharedMemoryServer&) = delete;

  // A session for a reader on `host_id` of `client` (its tenant; "" for
  // the single client token): FailedPrecondition when that is another
  // host, ResourceExhausted past kMaxSharedMemorySessions or the client's
  // kMaxPendingSharedMemoryOffersPerClient.
  absl::StatusOr<proto::OpenSharedMemoryResponse> Offer(const std::string& host_id,
                                                        const std::string& client = "");

  // The memory of a connected session, which stays mapped while the
  // pointer is held; nullptr when the session is unknown, has ended, or
  // `secret` is not its secret.
  std::shared_ptr<SharedRegion> Region(uint64_t session, const std::string& secret);

  // Connected sessions.
  int connected_sessions();

  // Lends the reader of `session` (connected, its secret checked by the
  // caller) the tensors of `elements` that lie whole in `heap`'s buffers:
  // each becomes an empty tensor of its dtype there, described in `lent`,
  // and the session keeps the tensor (so its buffer is not reused) until
  // the reader names the lease in Release or hangs up. The buffer's memfd
  // goes over the session's socket with the lease. Tensors past the
  // session's bounds (kMaxLentBytes, kMaxLeases, the mapping budget) lend
  // nothing: all of the response's tensors or none. Tensors whose memfd
  // cannot be sent stay as they are: the response then carries their bytes.
  // worker/shared_memory_lending.cc.
  // Returns the bytes lent.
  int64_t Lend(uint64_t session, SharedBufferHeap& heap, std::vector<Element>* elements,
               std::vector<proto::LentTensor>* lent);
  // Ends these leases of `session`; unknown ones are ignored.
  void Release(uint64_t session, const std::vector<uint64_t>& leases);
  // Ends the leases `request` gives back: those of its own session (whose
  // secret the caller checked) and those of the sessions it names with
  // their secrets (shm_released_elsewhere), once each secret is checked.
  void ReleaseGivenBack(const proto::GetElementsRequest& request);
  // Leases the session holds (tests and metrics).
  size_t leases(uint64_t session);

 private:
  struct Session {
    std::string secret;
    std::string client;
    absl::Time offered;
    UniqueFd socket;                       // once connected
    std::shared_ptr<SharedRegion> region;  // once connected
    // Tensors lent to the reader, by lease: each keeps its buffer from
    // reuse until the reader gives it back.
    struct Lease {
      Tensor tensor;
      int64_t buffer_bytes = 0;  // what it keeps from reuse: its whole buffer
    };
    std::map<uint64_t, Lease> leases;
    int64_t lent_bytes = 0;  // the leases' buffer_bytes
    uint64_t next_lease = 1;
  };

  SharedMemoryServer(UniqueFd listener, std::string name, UniqueFd wake_read, UniqueFd wake_write,
                     int64_t max_mapped_bytes);
  // Accepts readers, checks their hello, and ends sessions whose reader
  // hung up, until the destructor wakes it.
  void Loop();
  // One poll and what it found; false once stopping.
  bool Turn();
  void Accept();
  // Checks one connection's hello, which has come, and answers it.
  void Handshake(UniqueFd connection);
  // A refusal's warning, at most one a second (the loop's own).
  void Warn(const std::string& message);
  void DropExpiredOffers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the connected sessions' regions and lent tensors keep mapped.
  int64_t MappedBytesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const UniqueFd listener_;
  const std::string name_;
  const std::string host_id_;
  const UniqueFd wake_read_;
  const UniqueFd wake_write_;
  const int64_t max_mapped_bytes_;
  // Accepted connections whose hello has not come; the loop's own.
  struct Pending {
    UniqueFd connection;
    absl::Time since;
    uid_t uid = 0;
  };
  std::vector<Pending> pending_;
  absl::Time last_warning_ = absl::InfinitePast();
  int64_t suppressed_warnings_ = 0;
  std::thread thread_;

  absl::Mutex mu_;
  std::map<uint64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// What the GetElements adapter sends for `request`, given the encoded
// response `bytes`: nullopt to send them as they are (no shared memory
// asked, or they do not fit the request's region), else the marker that
// says they were written into the session's region (and lists `lent`, the
// tensors lent in their place). An error when the
// request names a session that is not open or a region outside it.
absl::StatusOr<std::optional<grpc::ByteBuffer>> PlaceInSharedMemory(
    const std::shared_ptr<SharedRegion>& region, const proto::GetElementsRequest& request,
    grpc::ByteBuffer& bytes, const std::vector<proto::LentTensor>& lent = {});

// The session's region for `request`, checked: nullptr when the request
// asks for no shared memory; FailedPrecondition when its session is not
// open; InvalidArgument naming the field when its region is out of bounds.
absl::StatusOr<std::shared_ptr<SharedRegion>> RequestRegion(SharedMemoryServer* server,
                                                            const proto::GetElementsRequest& request);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_SHARED_MEMORY_SERVER_H_
