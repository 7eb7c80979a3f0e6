// WorkerImpl: runs tasks (the part of a pipeline before `distribute`) and
// serves their elements.
//
// Each task has a thread that runs its pipeline into a buffer bounded by
// count and bytes; GetElements takes from the buffer, first come first
// served, so the consumers of a shared job split the elements between them.
// A request that finds the buffer empty is parked, not a blocked thread,
// and answered by the producer when elements arrive.
// In distributed_epoch the pipeline's source reads splits fetched from the
// dispatcher, several per request. The worker learns its tasks from
// heartbeats, reports finished ones, and on Stop tells the dispatcher, so
// that its tasks end at once rather than after a timeout. Draining, it
// takes no new work and waits for its readers before it leaves
// (docs/design.md, "Draining a worker").
#ifndef SLUICE_WORKER_WORKER_IMPL_H_
#define SLUICE_WORKER_WORKER_IMPL_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/dataset.h"
#include "service/dispatcher_client.h"
#include "service/element_wire.h"
#include "sluice/element.h"
#include "sluice/proto/service.grpc.pb.h"
#include "worker/worker_config.h"

namespace sluice::worker {

class SharedBufferHeap;
class SharedMemoryServer;

class WorkerImpl {
 public:
  // `shared_memory` serves readers on this host (worker/shared_memory_server.h),
  // or is null when it is off or could not start, for `shared_memory_error`.
  explicit WorkerImpl(
      WorkerConfig config, SharedMemoryServer* shared_memory = nullptr,
      absl::Status shared_memory_error = absl::UnavailableError("shared memory is not set up"));
  ~WorkerImpl();
  WorkerImpl(const WorkerImpl&) = delete;
  WorkerImpl& operator=(const WorkerImpl&) = delete;

  // Registers with the dispatcher (retrying until dispatcher_timeout_ms)
  // and starts heartbeating, advertising `address`.
  absl::Status Start(const std::string& address);
  // Tells the dispatcher this worker is leaving and stops every task.
  void Stop();
  // Draining (SIGTERM, or the dispatcher's answer after `sluice drain`):
  // every heartbeat says so from now on, the first at once; once the
  // dispatcher has answered one, every task, and any new one, is drained
  // (Task::Drain). `why` is logged; again does nothing.
  void Drain(const std::string& why);
  // Whether a draining worker may leave now: the dispatcher knows it
  // drains and has dropped each of its tasks (read to its end, or its
  // iteration over), or drain_timeout_ms has passed, losing what the
  // tasks still hold. workerd asks until it may, then shuts down (Stop).
  bool Drained();

  // What a GetElements request gets: up to its max_elements elements (to
  // be sent with `compression`), and whether the task has ended; or an
  // error.
  struct ElementsReply {
    absl::Status status;
    std::vector<Element> elements;
    bool end_of_sequence = false;
    // The position of elements[0] among all elements handed out for the task.
    int64_t first_index = 0;
    proto::WireCompression compression = proto::COMPRESSION_NONE;
    SplitTags tags;  // exactly_once tasks only
    // No elements: the next one is past the request's shared-memory region
    // and takes up to these many bytes (GetElementsRequest.shm_resizable).
    int64_t shared_memory_needed = 0;
    // A cross-trainer task: elements the trainer skipped just before these
    // (GetElementsResponse.trainer_skipped).
    int64_t trainer_skipped = 0;
    // No elements: the worker has no such task, or not with the request's
    // secret (GetElementsResponse.task_not_here).
    bool task_not_here = false;
    // Where the task allocates its large tensors, which a shared-memory
    // reader may map (null: the process's heap, nothing to lend).
    std::shared_ptr<SharedBufferHeap> heap;
  };
  using ElementsCallback = std::function<void(ElementsReply)>;

  // Answers at once when the task has elements or has ended; otherwise
  // parks the request (no thread waits) until it has, or answers it empty
  // after 50 ms, so that clients poll without spinning. `done` is called
  // exactly once, on this thread or another.
  void GetElements(const proto::GetElementsRequest& request, ElementsCallback done);
  // GetElements answered as the bytes to send (worker/element_responses.h:
  // encoded, lent and placed in the request's shared-memory region, or
  // inline), after checking the region the request names; counts what it
  // sends. `done` is called exactly once, on this thread or another.
  using ResponseCallback = std::function<void(absl::StatusOr<grpc::ByteBuffer>)>;
  void ServeElements(const proto::GetElementsRequest& request, ResponseCallback done);
  // The shared-memory offer for a reader on this host; FailedPrecondition
  // for a reader on another host, and the reason shared memory is off for
  // one on this host.
  // `client`: the caller's tenant ("" for the single client token), whose
  // offers not yet taken up are bounded.
  absl::Status OpenSharedMemory(const proto::OpenSharedMemoryRequest& request,
                                proto::OpenSharedMemoryResponse* response, const std::string& client = "");
  absl::Status GetStatus(const proto::WorkerStatusRequest& request, proto::WorkerStatusResponse* response);
  // Starts a task the dispatcher pushed (or does nothing if it runs).
  absl::Status ProcessTask(const proto::ProcessTaskRequest& request);

 private:
  // Counts what was sent to clients (reported in heartbeats and exported
  // as sluice_worker_elements_sent_total and sluice_worker_bytes_sent_total).
  void CountSent(int64_t elements, int64_t bytes);

  std::atomic<int64_t> elements_sent_{0};
  std::atomic<int64_t> bytes_sent_{0};
  // When a GetElements with a wrong task_secret was last logged (Unix ns).
  std::atomic<int64_t> last_secret_warning_ns_{0};
  class Task;

  // Who this worker is: its address, incarnation and tags (the first
  // heartbeat registers with them).
  proto::WorkerHeartbeatRequest HeartbeatRequest() const;
  absl::Status Heartbeat();
  void HeartbeatLoop();
  bool HeartbeatDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || heartbeat_now_; }
  void DrainLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the dispatcher the task ended: finished, and with a failed
  // pipeline's status, failed.
  // `dispatcher_incarnation`: the task's TaskDef's.
  void ReportFinished(int64_t task_id, const std::string& dispatcher_incarnation, const absl::Status& status);
  // Starts the task unless it runs; tasks it replaces go to `removed`,
  // for the caller to destroy after the lock.
  void StartTaskLocked(const proto::TaskDef& def, std::vector<std::shared_ptr<Task>>* removed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the tasks of a dispatcher incarnation other than `incarnation`
  // (when known) to `removed`.
  void DropOtherIncarnationsLocked(const std::string& incarnation,
                                   std::vector<std::shared_ptr<Task>>* removed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLoop();

  const WorkerConfig config_;
  SharedMemoryServer* const shared_memory_;
  const absl::Status shared_memory_error_;
  std::unique_ptr<DispatcherClient> dispatcher_;
  std::string address_;
  // Random per process: tells the dispatcher this run from an earlier one
  // at the same address.
  const std::string incarnation_;

  absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The next heartbeat goes now, not after heartbeat_interval_ms.
  bool heartbeat_now_ ABSL_GUARDED_BY(mu_) = false;
  // Draining since Drain; the dispatcher has answered a heartbeat that
  // says so (from then on it gives no new task, and any it had given
  // came with that answer); when the wait ends; and whether Drained has
  // said yes.
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_known_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time drain_deadline_ ABSL_GUARDED_BY(mu_);
  bool drained_ ABSL_GUARDED_BY(mu_) = false;
  // Tasks that failed to start, for the heartbeat thread to report.
  struct UnreportedFailure {
    int64_t task_id;
    std::string dispatcher_incarnation;
    absl::Status status;
  };
  std::vector<UnreportedFailure> unreported_failures_ ABSL_GUARDED_BY(mu_);
  // Start has registered; dispatcher_ is set (and constant) from then on.
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  std::thread heartbeat_thread_;
  std::thread expire_thread_;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_WORKER_IMPL_H_
