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
// that its tasks end at once rather than after a timeout.
#ifndef SLUICE_WORKER_WORKER_IMPL_H_
#define SLUICE_WORKER_WORKER_IMPL_H_

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
#include "absl/synchronization/mutex.h"
#include "pipeline/dataset.h"
#include "service/dispatcher_client.h"
#include "service/element_wire.h"
#include "sluice/element.h"
#include "sluice/service.grpc.pb.h"
#include "worker/worker_config.h"

namespace sluice::worker {

class SharedBufferHeap;

class WorkerImpl {
 public:
  explicit WorkerImpl(WorkerConfig config);
  ~WorkerImpl();
  WorkerImpl(const WorkerImpl&) = delete;
  WorkerImpl& operator=(const WorkerImpl&) = delete;

  // Registers with the dispatcher (retrying until dispatcher_timeout_ms)
  // and starts heartbeating, advertising `address`.
  absl::Status Start(const std::string& address);
  // Tells the dispatcher this worker is leaving and stops every task.
  void Stop();

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
  absl::Status GetStatus(const proto::WorkerStatusRequest& request, proto::WorkerStatusResponse* response);
  // Starts a task the dispatcher pushed (or does nothing if it runs).
  absl::Status ProcessTask(const proto::ProcessTaskRequest& request);

  // Counts what the adapter sent to clients (reported in heartbeats and
  // exported as sluice_worker_elements_sent_total and
  // sluice_worker_bytes_sent_total).
  void CountSent(int64_t elements, int64_t bytes);

 private:
  std::atomic<int64_t> elements_sent_{0};
  std::atomic<int64_t> bytes_sent_{0};
  class Task;

  // Who this worker is: its address, incarnation and tags (the first
  // heartbeat registers with them).
  proto::WorkerHeartbeatRequest HeartbeatRequest() const;
  absl::Status Heartbeat();
  void HeartbeatLoop();
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
  std::unique_ptr<DispatcherClient> dispatcher_;
  std::string address_;
  // Random per process: tells the dispatcher this run from an earlier one
  // at the same address.
  const std::string incarnation_;

  absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
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
