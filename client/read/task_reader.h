// TaskReader: the fetch loops of a read that is not coordinated. Each task
// the heartbeat learns of gets kRequestsInFlightPerTask fetch threads; each
// asks the task's worker for elements whenever the budget has room for a
// request worth sending (request_sizing.h), so that one round trip's
// latency overlaps the next. Responses go back in the task's order
// (response_order.h), through the exactly_once filter
// (split_position_filter.h), into the read's buffer.
#ifndef SLUICE_CLIENT_READ_TASK_READER_H_
#define SLUICE_CLIENT_READ_TASK_READER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "client/read/element_transport.h"
#include "client/read/read_state.h"
#include "client/read/request_sizing.h"
#include "sluice/proto/service.pb.h"

namespace sluice::reader {

// Requests in flight per task: the worker encodes while the previous
// response travels.
inline constexpr int kRequestsInFlightPerTask = 4;
// A task the dispatcher stopped listing is read on (ReadState::StillReading)
// until its worker has refused connections this long: a restarting worker
// answers task_not_here sooner, so this is a worker that is gone.
inline constexpr absl::Duration kUnlistedUnreachableGrace = absl::Seconds(2);

class TaskReader {
 public:
  // `state` outlives the reader and every thread it starts.
  TaskReader(ReadState& state, proto::WireCompression compression);

  // Starts the fetch threads of `task`, just listed as `task_id`, into
  // task.threads; the owner of `state` joins them. They end when the task
  // ends or is no longer read (ReadState::StillReading), or the read fails
  // or is cancelled. Call
  // with state.mu held (not annotated: the heartbeat holds it through its
  // own reference to the state, which the analysis cannot match).
  void Start(int64_t task_id, TaskState& task);

 private:
  // One request slot of a task: asks, waits for the answer unlocked, and
  // hands what came to ReleaseInOrder.
  void FetchLoop(int64_t task_id, const std::string& address, const std::string& task_secret,
                 ElementTransport& transport);
  // One fetch thread's view, for its wait condition.
  struct Slot {
    bool MayAsk() const;
    const TaskReader* reader;
    int64_t task_id;
  };
  // The room `task` may ask for: the budget's, or for a deterministic
  // read's task that may hold the next split, the budget's without the
  // later splits' elements waiting for it (read_state.h).
  int64_t RoomFor(const TaskState& task) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // Moves the task's responses whose turn has come into the buffer.
  void ReleaseInOrder(int64_t task_id, TaskState& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // A cross-trainer read: counts elements this trainer skipped, and warns
  // (at most once a minute) naming the worker.
  void NoteSkipped(const std::string& address, int64_t skipped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);

  ReadState& state_;
  const proto::WireCompression compression_;
  RequestSizing sizing_ ABSL_GUARDED_BY(state_.mu);
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_TASK_READER_H_
