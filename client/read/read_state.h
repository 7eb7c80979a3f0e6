// ReadState: what the threads of one data-service read share. The
// iterator's GetNext, the heartbeat (iteration_heartbeat.h), the fetch
// loops (task_reader.h) and the round loop (coordinated_reader.h) all work
// on one ReadState under its one mutex, `mu`; none holds it across an RPC.
// Buffered, held and requested elements together never exceed
// max_outstanding, which bounds memory.
#ifndef SLUICE_CLIENT_READ_READ_STATE_H_
#define SLUICE_CLIENT_READ_READ_STATE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/read/element_transport.h"
#include "client/read/epoch_losses.h"
#include "client/read/response_order.h"
#include "client/read/split_deliveries.h"
#include "client/read/split_order.h"
#include "client/read/split_position_filter.h"
#include "client/read/trainer_wait.h"
#include "client/read/transit_losses.h"
#include "service/int_ranges.h"
#include "service/worker_positions.h"
#include "sluice/element.h"

namespace sluice::reader {

// Errors of a worker (or dispatcher) that is slow, restarting or leaving:
// retried until the dispatcher stops listing the task, or its deadline.
bool IsTransientReadError(const absl::Status& status);

// One task of the iteration, as this reader sees it.
struct TaskState {
  // Tracks how long the task's worker has been unreachable, for the
  // report in the heartbeat.
  void NoteReachability(const absl::Status& status);

  std::string worker_address;
  // TaskInfo.read_secret, presented with every GetElements of the task.
  std::string read_secret;
  std::shared_ptr<ElementTransport> transport;
  std::vector<std::thread> threads;  // one per request in flight
  bool ended = false;
  // The worker said end_of_sequence: every element of the task arrived.
  // A task that ended only because its worker no longer knew it (the
  // iteration finished) may have been cut short by the worker's loss.
  bool read_whole = false;
  bool removed = false;  // no longer listed by the dispatcher
  // Ended though unlisted without its end (TaskReader: the worker no longer
  // had it, or could not be reached): never read whole after that.
  bool given_up = false;
  ResponseOrder order;
  // Since when requests fail as unreachable; the heartbeat reports the
  // worker to the dispatcher after a while.
  std::optional<absl::Time> unreachable_since;
  std::string unreachable_error;
  // Coordinated reads: the first round the task serves.
  int64_t starting_round = 0;
  // Elements of the task delivered to this reader.
  int64_t elements = 0;
  // exactly_once: the split of the task's latest element or completion
  // (-1 before any). A deterministic read judges by it whether the task
  // may hold the next split in order.
  int64_t latest_seq = -1;
  // A saved parallel_epochs read (ReadState::track_worker_positions): maps
  // the task's element indices to positions in its worker's epoch, past
  // those a restore skipped; and where the epoch ended, once seen.
  std::optional<SkippedPositions> skipped;
  int64_t end_position = -1;
  // Sole reader, not exactly_once (ReadState::track_index_gaps): holes in
  // the element indices received, which are responses lost in transit.
  TaskIndexGaps gaps;
  bool warned_unreachable = false;
};

// The reader's default budget (distribute's max_outstanding_requests
// unset): kDefaultMaxOutstanding elements to start with, then as many as
// fill kAdaptiveBudgetBytes at the average element size seen, up to
// kMaxAdaptiveOutstanding. Small elements then travel a thousand to a
// response, where 64 of them cost a round trip each 64; elements of 1 MiB
// and more keep the budget of 64.
inline constexpr int64_t kDefaultMaxOutstanding = 64;
inline constexpr int64_t kAdaptiveBudgetBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxAdaptiveOutstanding = 8192;

struct ReadState {
  // `max_outstanding_in`: the budget of elements; 0 adapts it (above).
  // `sole_reader`: no other consumer shares the job (it has no name).
  // `losses`: set for a parallel_epochs read, whose lost tasks cut it short.
  // `transport`: how to reach each task's worker.
  // `exactly_once`: elements carry split tags, which find their own holes.
  // `track_deliveries`: record each element's split tag as GetNext hands
  // it out, so that the read can be saved (exactly_once, not coordinated).
  // `restored`: what a restored read delivered before its save.
  // `deterministic_in`: hand elements out in split order (split_order.h).
  // `track_worker_positions_in`: a parallel_epochs read that can be saved
  // records the (worker, position) of each element GetNext hands out.
  ReadState(int64_t max_outstanding_in, bool sole_reader_in, std::optional<EpochLosses> losses_in,
            TransportOptions transport_in = {}, bool exactly_once = false, bool track_deliveries_in = false,
            const SplitDeliveries& restored = {}, bool deterministic_in = false,
            bool track_worker_positions_in = false)
      : adaptive_budget(max_outstanding_in <= 0),
        track_index_gaps(sole_reader_in && !exactly_once),
        track_deliveries(track_deliveries_in),
        deterministic(deterministic_in),
        track_worker_positions(track_worker_positions_in),
        restored_positions(restored.worker_positions()),
        transport(transport_in),
        initial_max_outstanding(max_outstanding_in > 0 ? max_outstanding_in : kDefaultMaxOutstanding),
        positions(sole_reader_in, restored),
        delivered(restored),
        order(restored),
        losses(std::move(losses_in)) {
    absl::MutexLock lock(&mu);
    max_outstanding = initial_max_outstanding;
  }

  // Elements there may be room for, neither buffered, held, waiting for
  // their turn in split order nor requested.
  int64_t Room() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return max_outstanding - static_cast<int64_t>(buffer.size()) - outstanding - held_elements -
           order.waiting();
  }
  // A deterministic read: whether `task` may hold the next split in order,
  // so that its elements go out at once. Later splits' elements may fill
  // the budget while they wait; such a task is read anyway (within the
  // room they leave), or the read would stall.
  bool MayHoldNextSplit(const TaskState& task) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // track_worker_positions: the position in its worker's epoch of `task`'s
  // element `index`; in increasing order unless `any_order`.
  int64_t PositionOf(TaskState& task, int64_t index, bool any_order = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // What GetNext has handed out; with track_worker_positions, also the end
  // of each task's epoch that it handed out whole.
  SplitDeliveries DeliveredWithEnds() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Moves what SplitOrder lets go (everything, once `all`) to the buffer.
  void ReleaseOrdered(bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // GetNext has something to return: an element, an error or the end.
  bool CanReturn() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Every task ended or was removed, and every response is in.
  bool Finished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Whether `task` is still read. parallel_epochs (losses): a task the
  // dispatcher stopped listing is read on until it ends, its worker no
  // longer has it, or its worker is unreachable: the dispatcher may only
  // have lost sight of a worker that still serves (issue 50, finding 9).
  // Other modes give an unlisted task's splits to other tasks, so reading
  // it on would repeat them.
  bool StillReading(const TaskState& task) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !task.ended && (!task.removed || losses.has_value());
  }
  // What tasks read to their end lost in transit; complete once Finished.
  TransitLosses TransitLossesOfEndedTasks() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // A budget left to the reader grows with the elements' average size.
  void AdaptBudget(int64_t average_element_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!adaptive_budget || average_element_bytes <= 0) return;
    max_outstanding = std::clamp<int64_t>(kAdaptiveBudgetBytes / average_element_bytes,
                                          kDefaultMaxOutstanding, kMaxAdaptiveOutstanding);
  }

  // Constant after construction.
  const bool adaptive_budget;
  // A sole reader gets each task's element indices whole (consumers of a
  // shared job split them), so a hole is a response lost in transit.
  const bool track_index_gaps;
  const bool track_deliveries;
  const bool deterministic;
  const bool track_worker_positions;
  // What a restored parallel_epochs read had delivered from each worker.
  const WorkerRanges restored_positions;
  const TransportOptions transport;
  const int64_t initial_max_outstanding;

  absl::Mutex mu;
  // State below is protected by mu.
  // Elements buffered, held and requested, at most.
  int64_t max_outstanding ABSL_GUARDED_BY(mu) = 0;
  std::deque<Element> buffer ABSL_GUARDED_BY(mu);
  // track_deliveries: each buffered element's (split seq, position);
  // track_worker_positions: its (task id, position in the worker's epoch).
  std::deque<std::pair<int64_t, int64_t>> buffer_tags ABSL_GUARDED_BY(mu);
  int64_t outstanding ABSL_GUARDED_BY(mu) = 0;    // requested, not yet back
  int64_t held_elements ABSL_GUARDED_BY(mu) = 0;  // received, waiting for their turn
  std::map<int64_t, TaskState> tasks ABSL_GUARDED_BY(mu);
  // Read to their end, not yet reported to the dispatcher.
  std::vector<int64_t> completed_tasks ABSL_GUARDED_BY(mu);
  // exactly_once: splits wholly received, not yet reported; and the
  // filter of repeated or out-of-order positions.
  std::vector<int64_t> completed_splits ABSL_GUARDED_BY(mu);
  SplitPositionFilter positions ABSL_GUARDED_BY(mu);
  // track_deliveries: what GetNext handed out, with what a restored read
  // had delivered before; what a save records.
  SplitDeliveries delivered ABSL_GUARDED_BY(mu);
  // deterministic: elements of later splits, waiting for the next one.
  SplitOrder order ABSL_GUARDED_BY(mu);
  // Coordinated reads: the next round to read, and the last one the
  // dispatcher's task list holds for.
  int64_t current_round ABSL_GUARDED_BY(mu) = 0;
  int64_t round_horizon ABSL_GUARDED_BY(mu) = -1;
  // The furthest round any consumer of the iteration has reached, from
  // the dispatcher's last heartbeat reply.
  int64_t furthest_round ABSL_GUARDED_BY(mu) = 0;
  // A shared exactly_once read that lost a task: the dispatcher's hold to
  // answer (0: none) and the held splits' seqs, whose positions this
  // reader took it reports once ReadyToReportTaken.
  int64_t report_hold ABSL_GUARDED_BY(mu) = 0;
  IntRanges report_splits ABSL_GUARDED_BY(mu);
  // No request is in flight to a task the dispatcher stopped listing: what
  // such a task delivered is all in, and it gets no request again.
  bool ReadyToReportTaken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return std::none_of(tasks.begin(), tasks.end(),
                        [](const auto& entry) { return entry.second.removed && !entry.second.order.idle(); });
  }
  bool iteration_finished ABSL_GUARDED_BY(mu) = false;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  // Asks the heartbeat to go now rather than at its interval.
  bool heartbeat_now ABSL_GUARDED_BY(mu) = false;
  // Autoscaling: when the read began, the seconds GetNext has waited for
  // elements, since when it waits now, and the trainer's wait then
  // (trainer_wait.h); each heartbeat reports ReportedWait.
  const std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
  const double trainer_wait_at_start = TrainerWaitSeconds().value_or(0);
  double waited_seconds ABSL_GUARDED_BY(mu) = 0;
  std::optional<std::chrono::steady_clock::time_point> waiting_since ABSL_GUARDED_BY(mu);
  // GetNext's wait, a wait under way included; at most the trainer's own
  // since the read began, where a layer above measures it.
  double ReportedWait(std::chrono::steady_clock::time_point now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const double own =
        waited_seconds +
        (waiting_since.has_value() ? std::chrono::duration<double>(now - *waiting_since).count() : 0);
    const std::optional<double> trainer = TrainerWaitSeconds();
    return trainer.has_value() ? std::min(own, *trainer - trainer_wait_at_start) : own;
  }
  // The first error; the read fails with it once the buffer is drained.
  absl::Status status ABSL_GUARDED_BY(mu);
  // parallel_epochs: tasks lost before the reader saw their end.
  std::optional<EpochLosses> losses ABSL_GUARDED_BY(mu);
  // Lost tasks this reader never heard of while they ran.
  int64_t unseen_lost_tasks ABSL_GUARDED_BY(mu) = 0;
  // ServiceReadOptions::lost_splits_repeat; set before the threads start.
  bool lost_splits_repeat = false;
  // ServiceReadOptions::trainer_id; set before the threads start.
  std::string trainer_id;
  // A cross-trainer read: elements of the stream this trainer skipped,
  // having fallen behind what the workers keep; when it last warned.
  int64_t trainer_skipped ABSL_GUARDED_BY(mu) = 0;
  std::optional<absl::Time> warned_skip ABSL_GUARDED_BY(mu);
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_READ_STATE_H_
