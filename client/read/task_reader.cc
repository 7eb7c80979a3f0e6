#include "client/read/task_reader.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/read/warnings.h"
#include "service/element_wire.h"
#include "service/metrics.h"

namespace sluice::reader {
namespace {

// Whether a task read on though unlisted is over, given its latest answer:
// its worker no longer has it, or cannot be reached.
bool UnlistedTaskGone(const TaskState& task, const absl::Status& status, const ElementsResponse& response) {
  if (status.ok()) return response.task_not_here;
  // A request unanswered for its whole deadline: the path to the worker is
  // cut, which the reader cannot tell from a dead host.
  if (absl::IsDeadlineExceeded(status)) return true;
  return task.unreachable_since.has_value() &&
         absl::Now() - *task.unreachable_since >= kUnlistedUnreachableGrace;
}

}  // namespace

TaskReader::TaskReader(ReadState& state, proto::WireCompression compression)
    : state_(state), compression_(compression), sizing_(state.initial_max_outstanding) {}

void TaskReader::Start(int64_t task_id, TaskState& task) {
  state_.mu.AssertHeld();
  for (int i = 0; i < kRequestsInFlightPerTask; ++i) {
    task.threads.emplace_back(
        [this, task_id, address = task.worker_address, secret = task.read_secret,
         transport = task.transport] { FetchLoop(task_id, address, secret, *transport); });
  }
}

int64_t TaskReader::RoomFor(const TaskState& task) const {
  const int64_t room = state_.Room();
  if (!state_.deterministic || sizing_.WorthAsking(room) || !state_.MayHoldNextSplit(task)) return room;
  return room + state_.order.waiting();
}

// Not annotated: the state's mutex is reached through the reader, which
// the analysis cannot match with the one Await holds.
bool TaskReader::Slot::MayAsk() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  ReadState& state = reader->state_;
  state.mu.AssertReaderHeld();
  if (state.cancelled) return true;
  auto task = state.tasks.find(task_id);
  // A task gone from the map is not waited for (the read is ending).
  return task == state.tasks.end() || reader->sizing_.WorthAsking(reader->RoomFor(task->second));
}

void TaskReader::FetchLoop(int64_t task_id, const std::string& address, const std::string& task_secret,
                           ElementTransport& transport) {
  std::chrono::milliseconds backoff(10);
  const Slot slot{this, task_id};
  while (true) {
    int want = 0;
    int64_t stamp = 0;
    // An empty answer means the task is over only if the iteration had
    // finished when it was asked for. A worker also answers empty while
    // the task has not reached it (its push failed; its heartbeat brings
    // it): over a slow link that answer can land after the worker made
    // every element and the iteration finished.
    bool finished_when_asked = false;
    {
      absl::MutexLock lock(&state_.mu);
      state_.mu.Await(absl::Condition(&slot, &Slot::MayAsk));
      TaskState& task = state_.tasks[task_id];
      if (state_.cancelled || !state_.StillReading(task) || !state_.status.ok()) return;
      want = static_cast<int>(sizing_.ElementsToAsk(RoomFor(task)));
      state_.outstanding += want;
      stamp = task.order.Send();
      finished_when_asked = state_.iteration_finished;
    }
    proto::GetElementsRequest request;
    request.set_task_id(task_id);
    request.set_task_secret(task_secret);
    request.set_max_elements(want);
    request.set_compression(compression_);
    if (!state_.trainer_id.empty()) request.set_trainer_id(state_.trainer_id);
    ElementsResponse response;
    absl::Status status = transport.GetElements(request, &response);
    absl::MutexLock lock(&state_.mu);
    state_.outstanding -= want;
    TaskState& task = state_.tasks[task_id];
    task.order.Returned(stamp);
    const bool end_of_sequence = response.end_of_sequence;
    const bool empty = response.elements.empty();
    const int64_t end_index = response.first_index + static_cast<int64_t>(response.elements.size());
    if (status.ok() && response.trainer_skipped > 0) NoteSkipped(address, response.trainer_skipped);
    if (status.ok() && !empty) {
      for (const Element& e : response.elements) sizing_.Observe(e.ByteSize());
      state_.AdaptBudget(sizing_.AverageBytes());
      sizing_.SetBudget(state_.max_outstanding);
      state_.held_elements += static_cast<int64_t>(response.elements.size());
    }
    if (status.ok() && (!empty || !response.tags.completed_splits.empty())) {
      status = task.order.Hold(std::move(response));  // DataLoss ends the read below
    }
    ReleaseInOrder(task_id, task);
    task.NoteReachability(status);
    // Read on after the dispatcher stopped listing it (StillReading).
    const bool unlisted = task.removed;
    if (unlisted && !end_of_sequence && UnlistedTaskGone(task, status, response)) {
      task.ended = true;
      task.given_up = true;
      // ApplyReply counted the loss when the task was unlisted; the read's
      // end settles it with what came (EpochLosses::Settle).
      state_.heartbeat_now = true;
      return;
    }
    if (status.ok()) {
      backoff = std::chrono::milliseconds(10);
      // A finished iteration whose worker no longer knows the task has
      // nothing more to give; but an unlisted task's worker may still be
      // making elements though the iteration finished (its task counted
      // lost), so only its end (or UnlistedTaskGone above) ends that one.
      if (end_of_sequence || (empty && finished_when_asked && !unlisted)) {
        const bool first_end = !task.ended;
        task.ended = true;
        // Not after the task was given up: a response lost to the deadline
        // that gave it up left a hole that nothing after the end tracks.
        task.read_whole = task.read_whole || (end_of_sequence && !task.given_up);
        // parallel_epochs: a worker forgets a task before its reader saw the
        // end only when the dispatcher took it away (the worker was
        // removed, then came back): the rest of its epoch is lost, and the
        // dispatcher, whose iteration had finished, may not say so.
        if (!end_of_sequence && first_end && state_.losses.has_value()) {
          state_.losses->TaskLost(task_id, address,
                                  "its worker no longer had the task: removed by the dispatcher before this "
                                  "reader had read it all",
                                  task.elements);
        }
        // Every element of the task is here: its splits need never be
        // read again, even if its worker is lost now.
        if (end_of_sequence && first_end) {
          state_.completed_tasks.push_back(task_id);
          if (state_.track_index_gaps) task.gaps.Ended(end_index);
          if (state_.track_worker_positions)
            task.end_position = state_.PositionOf(task, end_index, /*any_order=*/true);
        }
        // Ask at once whether the iteration is over, rather than at the
        // next heartbeat: the end of an epoch then costs no wait.
        state_.heartbeat_now = true;
        return;
      }
      if (!empty) continue;
    } else if (!IsTransientReadError(status)) {
      // The transport's own errors name the worker already.
      state_.status = absl::StrContains(status.message(), address)
                          ? status
                          : absl::Status(status.code(), absl::StrCat("reading from worker ", address, ": ",
                                                                     status.message()));
      return;
    }
    // Nothing yet (or the worker is unreachable): wait a little.
    state_.mu.AwaitWithTimeout(absl::Condition(&state_.cancelled), absl::FromChrono(backoff));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

void TaskReader::NoteSkipped(const std::string& address, int64_t skipped) {
  static Counter& skipped_total =
      ProcessMetrics()
          .AddCounter(
              "sluice_client_cross_trainer_skipped_total",
              "elements of a cross-trainer job's stream this trainer skipped, having fallen behind what "
              "the workers keep")
          .Get();
  skipped_total.Increment(static_cast<double>(skipped));
  state_.trainer_skipped += skipped;
  // Once a minute at most: a trainer that stays behind skips at every
  // request.
  const absl::Time now = absl::Now();
  if (state_.warned_skip.has_value() && now - *state_.warned_skip < absl::Minutes(1)) return;
  state_.warned_skip = now;
  Warn(absl::StrCat("cross_trainer_cache: trainer '", state_.trainer_id, "' fell behind what worker ",
                    address, " keeps and skipped ", skipped, " elements (", state_.trainer_skipped,
                    " in all in this read); it reads more slowly than the trainers ahead of it, or max_bytes "
                    "is too small for how far apart they are"));
}

void TaskReader::ReleaseInOrder(int64_t task_id, TaskState& task) {
  while (std::optional<ResponseOrder::Ready> ready = task.order.PopReady()) {
    state_.held_elements -= static_cast<int64_t>(ready->elements.size());
    const SplitTags& tags = ready->tags;
    if (state_.track_index_gaps) {
      task.gaps.Delivered(ready->first_index, static_cast<int64_t>(ready->elements.size()));
    }
    for (size_t i = 0; i < ready->elements.size(); ++i) {
      // exactly_once: repeats of a rerun split are dropped, and so is
      // what follows a response lost in transit (split_position_filter.h).
      if (!tags.split_seqs.empty()) {
        task.latest_seq = tags.split_seqs[i];
        if (!state_.positions.Accept(tags.split_seqs[i], tags.split_positions[i])) continue;
      }
      if (state_.deterministic && !tags.split_seqs.empty() &&
          !state_.order.PassesStraight(tags.split_seqs[i])) {
        state_.order.Add(tags.split_seqs[i], tags.split_positions[i], std::move(ready->elements[i]));
        ++task.elements;
        continue;
      }
      state_.buffer.push_back(std::move(ready->elements[i]));
      if (state_.track_worker_positions) {
        state_.buffer_tags.emplace_back(
            task_id, state_.PositionOf(task, ready->first_index + static_cast<int64_t>(i)));
      } else if (state_.track_deliveries) {
        state_.buffer_tags.push_back(
            tags.split_seqs.empty()
                ? std::pair<int64_t, int64_t>(-1, -1)
                : std::pair<int64_t, int64_t>(tags.split_seqs[i], tags.split_positions[i]));
      }
      ++task.elements;
    }
    // Reported only now, in order: an earlier response still out may hold
    // the split's first elements. A split with a gap is not reported, so
    // that it is read again.
    for (size_t i = 0; i < tags.completed_splits.size(); ++i) {
      const int64_t seq = tags.completed_splits[i];
      task.latest_seq = seq;
      if (state_.positions.CompleteInOrder(seq)) {
        state_.completed_splits.push_back(seq);
        if (state_.deterministic) state_.order.Complete(seq);
      }
      if (state_.track_deliveries && i < tags.completed_split_sizes.size()) {
        state_.delivered.SetSize(seq, tags.completed_split_sizes[i]);
      }
    }
  }
  if (state_.deterministic) state_.ReleaseOrdered(/*all=*/false);
}

}  // namespace sluice::reader
