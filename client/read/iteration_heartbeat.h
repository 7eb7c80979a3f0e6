// IterationHeartbeat: a reader's side of the iteration's heartbeat. Every
// kHeartbeatInterval (or at once when a loop sets heartbeat_now) it tells
// the dispatcher what the reader finished (tasks read to their end,
// exactly_once splits wholly received), which workers do not answer,
// which round it is at and how long its trainer has waited (autoscaling);
// from the reply it learns the task list (starting the fetch threads of
// new tasks), lost tasks, the round horizon and whether the iteration is
// finished or failed.
#ifndef SLUICE_CLIENT_READ_ITERATION_HEARTBEAT_H_
#define SLUICE_CLIENT_READ_ITERATION_HEARTBEAT_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/read/read_state.h"
#include "client/read/task_reader.h"
#include "service/dispatcher_client.h"

namespace sluice::reader {

class IterationHeartbeat {
 public:
  // `fetches`: starts the fetch threads of each new task; null for a
  // coordinated read, whose round loop reads every task.
  // `dispatcher_deadline`: how long the dispatcher may go unheard before
  // the read fails. All references outlive the heartbeat.
  // `client_secret` is the client's, which every heartbeat presents.
  IterationHeartbeat(ReadState& state, DispatcherClient& service, int64_t iteration_client_id,
                     std::string client_secret, absl::Duration dispatcher_deadline, TaskReader* fetches);

  // Heartbeats until the read is cancelled. Runs on its own thread.
  void HeartbeatLoop();

 private:
  // Takes in the dispatcher's reply.
  void ApplyReply(const proto::ClientHeartbeatResponse& response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // What every answer says besides the task lists: errors, the end, rounds.
  void ApplyStatus(const proto::ClientHeartbeatResponse& response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // A dispatcher unheard for dispatcher_deadline_ fails the read, naming
  // it; before that, one warning says that the reader is retrying.
  void NoteDispatcherReachability(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // An unfinished iteration that no worker serves (every worker lost, none
  // registered again) fails the read after dispatcher_deadline_, naming
  // it; before that, one warning says that the reader waits for a worker.
  void NoteServingWorkers(const proto::ClientHeartbeatResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  bool HeartbeatDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) {
    return state_.cancelled || state_.heartbeat_now;
  }

  ReadState& state_;
  DispatcherClient& service_;
  const int64_t client_id_;
  const std::string client_secret_;
  const absl::Duration dispatcher_deadline_;
  TaskReader* const fetches_;

  // The last answer from the dispatcher (or the start).
  absl::Time dispatcher_heard_ ABSL_GUARDED_BY(state_.mu) = absl::Now();
  bool warned_dispatcher_ ABSL_GUARDED_BY(state_.mu) = false;
  // Since when the dispatcher lists no task for the iteration.
  std::optional<absl::Time> no_worker_since_ ABSL_GUARDED_BY(state_.mu);
  bool warned_no_worker_ ABSL_GUARDED_BY(state_.mu) = false;
  // The dispatcher's name for the task lists last applied (0: none), and
  // whether they listed any task: an answer may leave the lists out when
  // they are unchanged.
  int64_t known_task_list_ ABSL_GUARDED_BY(state_.mu) = 0;
  bool listed_tasks_ ABSL_GUARDED_BY(state_.mu) = false;
  // Lost tasks whose possible repeats this reader has warned of.
  std::set<int64_t> warned_repeats_ ABSL_GUARDED_BY(state_.mu);
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_ITERATION_HEARTBEAT_H_
