// ClientRpcs: an iteration's clients once they joined. A heartbeat reports
// what the client finished and which workers it cannot reach, and learns
// its iteration's tasks (with their read secrets), lost tasks, errors and
// end; a release lets the iteration go. Each call presents the client's
// secret.
#ifndef SLUICE_DISPATCHER_CLIENT_RPCS_H_
#define SLUICE_DISPATCHER_CLIENT_RPCS_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/liveness.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

class ClientRpcs {
 public:
  ClientRpcs(DispatcherCore& core, Liveness& liveness);

  absl::Status ClientHeartbeat(const proto::ClientHeartbeatRequest& request,
                               proto::ClientHeartbeatResponse* response, const Caller& caller);
  absl::Status ReleaseIterationClient(const proto::ReleaseIterationClientRequest& request,
                                      proto::ReleaseIterationClientResponse* response, const Caller& caller);

 private:
  using Clock = DispatcherCore::Clock;
  using NewTasks = DispatcherCore::NewTasks;

  // PermissionDenied naming `rpc` unless `presented` is the client's secret.
  absl::Status CheckClientSecret(absl::string_view rpc, int64_t iteration_client_id,
                                 const std::string& presented) const;
  // At the end of a shared iteration, for `client_id`'s heartbeat: a peer
  // released for silence lost what it had taken (DataLoss), and while a
  // peer is silent the end is held back (it may be dead).
  void CheckPeersAtEnd(const DispatcherState::Iteration& iteration, int64_t client_id,
                       proto::ClientHeartbeatResponse* response) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // client_secrets_.ForTask(task_id), computed once: every client
  // heartbeat carries the read secret of each of its iteration's tasks.
  const std::string& ReadSecretOf(int64_t task_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // A shared exactly_once read's client says which positions it took of
  // splits still out: in answer to hold `hold` (taken only from an awaited
  // client, for the current hold), or on its release (hold 0). Held splits
  // that every awaited client has answered for go back, and get a task. A
  // report `cut` short, or past kMaxIterationTakenNumbers for the
  // iteration, fails the iteration (ResourceExhausted) for every reader.
  absl::Status TakePositions(absl::string_view rpc, int64_t iteration_id, int64_t client_id, int64_t hold,
                             bool cut,
                             const google::protobuf::RepeatedPtrField<proto::SplitDelivery>& positions,
                             NewTasks* new_tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // The iteration's live tasks and its lost ones, into the answer.
  void ListTasks(const DispatcherState::Iteration& iteration, proto::ClientHeartbeatResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);

  DispatcherCore& core_;
  Liveness& liveness_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_CLIENT_RPCS_H_
