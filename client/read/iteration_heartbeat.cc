#include "client/read/iteration_heartbeat.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/read/element_transport.h"
#include "client/read/warnings.h"
#include "service/heartbeat_bounds.h"

namespace sluice::reader {
namespace {

constexpr absl::Duration kHeartbeatInterval = absl::Milliseconds(100);
// A worker unreachable this long is reported to the dispatcher, which
// declares it lost if it has stopped heartbeating too; a dispatcher
// unheard this long is warned about.
constexpr absl::Duration kUnreachableReportAfter = absl::Seconds(1);
// An iteration no worker serves this long is warned about: workers that
// start after the reader are usually up by then.
constexpr absl::Duration kNoWorkerWarnAfter = absl::Seconds(5);

}  // namespace

IterationHeartbeat::IterationHeartbeat(ReadState& state, DispatcherClient& service,
                                       int64_t iteration_client_id, std::string client_secret,
                                       absl::Duration dispatcher_deadline, TaskReader* fetches)
    : state_(state),
      service_(service),
      client_id_(iteration_client_id),
      client_secret_(std::move(client_secret)),
      dispatcher_deadline_(dispatcher_deadline),
      fetches_(fetches) {}

void IterationHeartbeat::HeartbeatLoop() {
  while (true) {
    proto::ClientHeartbeatRequest request;
    request.set_iteration_client_id(client_id_);
    request.set_client_secret(client_secret_);
    std::vector<int64_t> reported;
    std::vector<int64_t> reported_splits;
    int64_t answered_hold = 0;
    {
      absl::MutexLock lock(&state_.mu);
      request.set_known_task_list(known_task_list_);
      // The dispatcher takes at most kMaxCompletedPerHeartbeat of each; the
      // rest (kept while it was unreachable) go with the next heartbeats.
      reported.assign(state_.completed_tasks.begin(),
                      state_.completed_tasks.begin() +
                          std::min<size_t>(state_.completed_tasks.size(), kMaxCompletedPerHeartbeat));
      reported_splits.assign(state_.completed_splits.begin(),
                             state_.completed_splits.begin() +
                                 std::min<size_t>(state_.completed_splits.size(), kMaxCompletedPerHeartbeat));
      std::set<std::string> unreachable;
      for (auto& [id, task] : state_.tasks) {
        if (!task.removed && task.unreachable_since.has_value() &&
            absl::Now() - *task.unreachable_since >= kUnreachableReportAfter) {
          unreachable.insert(task.worker_address);
          if (!task.warned_unreachable) {
            task.warned_unreachable = true;
            Warn(absl::StrCat(
                "worker ", task.worker_address, " (task ", id, ") does not answer: ", task.unreachable_error,
                "; reading from the other workers, and reported to the dispatcher at ", service_.address()));
          }
        }
      }
      for (const std::string& address : unreachable) {
        if (request.unreachable_workers_size() == kMaxUnreachablePerHeartbeat) break;
        request.add_unreachable_workers(address);
      }
      // A shared read's lost task: what this reader took of its held
      // splits, once nothing more can come from it.
      if (state_.report_hold != 0 && state_.ReadyToReportTaken()) {
        answered_hold = state_.report_hold;
        request.set_answered_hold(answered_hold);
        bool cut = false;
        for (const auto& [seq, positions] :
             state_.positions.Taken(state_.report_splits, kMaxTakenPositionNumbers, &cut)) {
          proto::SplitDelivery* taken = request.add_taken_positions();
          taken->set_seq(seq);
          AppendPairs(positions, taken->mutable_delivered());
        }
        request.set_taken_positions_cut(cut);
      }
      request.set_current_round(state_.current_round);
      const auto now = std::chrono::steady_clock::now();
      request.set_wait_seconds(state_.ReportedWait(now));
      request.set_read_seconds(std::chrono::duration<double>(now - state_.began).count());
    }
    for (int64_t id : reported) request.add_completed_tasks(id);
    for (int64_t seq : reported_splits) request.add_completed_splits(seq);
    proto::ClientHeartbeatResponse response;
    absl::Status status = service_.ClientHeartbeat(
        std::move(request), &response,
        {.attempt_timeout = std::min<std::chrono::milliseconds>(
             kDispatcherRpcTimeout, absl::ToChronoMilliseconds(dispatcher_deadline_))});
    absl::MutexLock lock(&state_.mu);
    if (state_.cancelled) return;
    NoteDispatcherReachability(status);
    if (status.ok()) {
      state_.completed_tasks.erase(state_.completed_tasks.begin(),
                                   state_.completed_tasks.begin() + reported.size());
      state_.completed_splits.erase(state_.completed_splits.begin(),
                                    state_.completed_splits.begin() + reported_splits.size());
      // Delivered for good now: never held, so their positions need no
      // keeping.
      for (int64_t seq : reported_splits) state_.positions.Forget(seq);
      if (answered_hold != 0 && answered_hold == state_.report_hold) state_.report_hold = 0;
      // A backlog past one heartbeat's bound goes at once, not a beat later.
      if (state_.completed_tasks.size() + state_.completed_splits.size() > 0 &&
          (reported.size() == kMaxCompletedPerHeartbeat ||
           reported_splits.size() == kMaxCompletedPerHeartbeat)) {
        state_.heartbeat_now = true;
      }
      ApplyReply(response);
    } else if (!IsTransientReadError(status)) {
      state_.status = status;  // the dispatcher refused us: nothing to wait for
    }
    state_.mu.AwaitWithTimeout(absl::Condition(this, &IterationHeartbeat::HeartbeatDue), kHeartbeatInterval);
    if (state_.cancelled) return;
    state_.heartbeat_now = false;
  }
}

void IterationHeartbeat::ApplyReply(const proto::ClientHeartbeatResponse& response) {
  if (response.task_list_unchanged() && known_task_list_ != 0) {
    ApplyStatus(response);
    return;
  }
  known_task_list_ = response.task_list();
  listed_tasks_ = response.tasks_size() > 0;
  std::set<int64_t> listed;
  for (const proto::TaskInfo& info : response.tasks()) {
    listed.insert(info.task_id());
    if (state_.tasks.contains(info.task_id())) continue;
    TaskState& task = state_.tasks[info.task_id()];
    task.worker_address = info.worker_address();
    task.read_secret = info.read_secret();
    task.transport = MakeElementTransport(info.worker_address(), state_.transport);
    task.starting_round = info.starting_round();
    // Coordinated reads go round by round from one thread.
    if (fetches_ != nullptr) fetches_->Start(info.task_id(), task);
  }
  for (const proto::LostTask& lost : response.lost_tasks()) {
    auto task = state_.tasks.find(lost.task_id());
    if (state_.lost_splits_repeat && task != state_.tasks.end() && !task->second.ended &&
        task->second.elements > 0 && warned_repeats_.insert(lost.task_id()).second) {
      Warn(absl::StrCat("worker ", lost.worker_address(), " was lost (", lost.reason(), ") after its task ",
                        lost.task_id(), " had delivered ", task->second.elements,
                        " elements to this reader: distributed_epoch reads the splits it had not finished "
                        "again, so up to ",
                        task->second.elements,
                        " of them may arrive twice (exactly_once: true receives each element exactly once)"));
    }
    // A task read to its end (end_of_sequence) lost nothing; one that
    // ended because its worker had forgotten it may have lost the rest (a
    // worker partitioned past its timeout, then back: issue 36).
    if (!state_.losses.has_value() || (task != state_.tasks.end() && task->second.read_whole)) continue;
    state_.losses->TaskLost(lost.task_id(), lost.worker_address(), lost.reason(),
                            task == state_.tasks.end() ? 0 : task->second.elements);
    if (task == state_.tasks.end()) ++state_.unseen_lost_tasks;
  }
  // A drained worker's epoch ends early but whole (EpochLosses::Settle).
  for (int64_t id : response.drained_tasks()) {
    auto task = state_.tasks.find(id);
    if (state_.losses.has_value() && task != state_.tasks.end()) {
      state_.losses->TaskDrained(id, task->second.worker_address);
    }
  }
  for (auto& [id, task] : state_.tasks) {
    if (listed.contains(id) || task.removed) continue;
    task.removed = true;
    // After lost_tasks, whose reasons are the precise ones.
    // parallel_epochs: the dispatcher unlists a task only when its worker
    // was removed. One not read to its end may have lost the rest of its
    // epoch, which lost_tasks does not say once the iteration finished (its
    // tasks had made every element): a worker partitioned past its timeout,
    // then healed (issue 36). The task is read on (StillReading), and the
    // read's end takes the loss back if its end came (EpochLosses::Settle).
    if (state_.losses.has_value() && !task.read_whole) {
      state_.losses->TaskLost(id, task.worker_address,
                              "removed by the dispatcher before this reader had read its task to the end",
                              task.elements);
    }
  }
  ApplyStatus(response);
}

void IterationHeartbeat::ApplyStatus(const proto::ClientHeartbeatResponse& response) {
  if (response.error_code() != 0 && state_.status.ok()) {
    state_.status = absl::Status(static_cast<absl::StatusCode>(response.error_code()),
                                 absl::StrCat("the iteration failed: ", response.error_message()));
  }
  state_.iteration_finished = response.iteration_finished();
  if (response.lowest_outstanding_split() > 0)
    state_.positions.ForgetBelow(response.lowest_outstanding_split());
  // After the task lists, which unlist the lost task whose splits are held.
  if (response.report_hold() != 0 && response.report_hold() != state_.report_hold) {
    absl::StatusOr<IntRanges> held = RangesFromPairs(response.report_splits(), 1, "report_splits");
    if (held.ok()) {
      state_.report_hold = response.report_hold();
      state_.report_splits = *std::move(held);
      state_.heartbeat_now = true;
    } else if (state_.status.ok()) {
      state_.status = absl::InternalError(absl::StrCat("the dispatcher at ", service_.address(),
                                                       " sent malformed ", held.status().message()));
    }
  }
  state_.round_horizon = response.round_horizon();
  state_.furthest_round = std::max(state_.furthest_round, response.furthest_round());
  NoteServingWorkers(response);
}

void IterationHeartbeat::NoteServingWorkers(const proto::ClientHeartbeatResponse& response) {
  if (listed_tasks_ || response.iteration_finished()) {
    no_worker_since_.reset();
    warned_no_worker_ = false;
    return;
  }
  const absl::Time now = absl::Now();
  if (!no_worker_since_.has_value()) no_worker_since_ = now;
  const absl::Duration waited = now - *no_worker_since_;
  if (waited >= dispatcher_deadline_) {
    if (state_.status.ok()) {
      state_.status = absl::UnavailableError(absl::StrCat(
          "no worker has served this read for ", absl::ToInt64Milliseconds(waited), " ms (timeout_ms ",
          absl::ToInt64Milliseconds(dispatcher_deadline_), "): the dispatcher at ", service_.address(),
          " lists no worker for the iteration; start workers, or raise timeout_ms"));
    }
  } else if (waited >= kNoWorkerWarnAfter && !warned_no_worker_) {
    warned_no_worker_ = true;
    Warn(absl::StrCat("no worker serves this read yet (the dispatcher at ", service_.address(),
                      " lists none); waiting for up to ", absl::ToInt64Milliseconds(dispatcher_deadline_),
                      " ms (timeout_ms)"));
  }
}

void IterationHeartbeat::NoteDispatcherReachability(const absl::Status& status) {
  const absl::Time now = absl::Now();
  if (status.ok() || !IsTransientReadError(status)) {
    dispatcher_heard_ = now;
    warned_dispatcher_ = false;
    return;
  }
  const absl::Duration silent = now - dispatcher_heard_;
  if (silent >= dispatcher_deadline_) {
    if (state_.status.ok()) {
      state_.status = absl::UnavailableError(
          absl::StrCat("lost the dispatcher at ", service_.address(), ": no answer for ",
                       absl::ToInt64Milliseconds(silent), " ms (timeout_ms ",
                       absl::ToInt64Milliseconds(dispatcher_deadline_), "): ", status.message()));
    }
  } else if (silent >= kUnreachableReportAfter && !warned_dispatcher_) {
    warned_dispatcher_ = true;
    Warn(absl::StrCat("the dispatcher at ", service_.address(), " does not answer (", status.message(),
                      "); retrying for up to ", absl::ToInt64Milliseconds(dispatcher_deadline_),
                      " ms (timeout_ms)"));
  }
}

}  // namespace sluice::reader
