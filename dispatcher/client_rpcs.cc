// ClientRpcs: an iteration's clients once they joined: heartbeats and
// releases. Each call presents the client's secret (ClientSecrets): ids
// are sequential, so without it anyone holding the client token could
// complete another reader's tasks or splits (and lose its data) or steer
// its coordinated rounds.
#include "dispatcher/client_rpcs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "dispatcher/request_checks.h"
#include "dispatcher/tenant_quotas.h"
#include "service/grpc_util.h"
#include "service/heartbeat_bounds.h"

namespace sluice::dispatcher {

ClientRpcs::ClientRpcs(DispatcherCore& core, Liveness& liveness) : core_(core), liveness_(liveness) {}

absl::Status ClientRpcs::CheckClientSecret(absl::string_view rpc, int64_t iteration_client_id,
                                           const std::string& presented) const {
  if (core_.client_secrets_.Matches(iteration_client_id, presented)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      rpc, ": iteration client ", iteration_client_id, " was not created by this caller: client_secret is ",
      presented.empty() ? "missing" : "wrong", " (a client may act only in its own name)"));
}

absl::Status ClientRpcs::ClientHeartbeat(const proto::ClientHeartbeatRequest& request,
                                         proto::ClientHeartbeatResponse* response, const Caller&) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  if (absl::Status s =
          CheckClientSecret("ClientHeartbeat", request.iteration_client_id(), request.client_secret());
      !s.ok()) {
    return s;
  }
  NewTasks new_tasks;
  {
    absl::MutexLock lock(&core_.mu_);
    std::optional<int64_t> iteration_id = core_.state_.IterationOfClient(request.iteration_client_id());
    if (!iteration_id.has_value()) {
      absl::StatusOr<int64_t> resumed = liveness_.ResumeReleasedClient(request.iteration_client_id());
      if (!resumed.ok()) return resumed.status();
      iteration_id = *resumed;
    }
    core_.client_activity_.NoteHeard(request.iteration_client_id(), Clock::now());
    core_.autoscaler_.NoteClient(request.iteration_client_id(), request.wait_seconds(),
                                 request.read_seconds());
    if (const auto* iteration = core_.state_.FindIteration(*iteration_id);
        core_.state_.FindJob(iteration->job_id)->params.num_consumers() > 0) {
      // A consumer goes past the horizon only with a newer task list, so
      // one that says it did is wrong, and would move every consumer's
      // horizon and furthest round with it.
      if (request.current_round() > iteration->round_horizon + 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("ClientHeartbeat: current_round ", request.current_round(),
                         " is past round_horizon ", iteration->round_horizon, " + 1 of iteration ",
                         iteration->id, ": a consumer reads past the horizon only with a newer task list"));
      }
      int64_t& furthest = core_.iteration_rounds_[iteration->id];
      furthest = std::max(furthest, request.current_round());
      // Keeps the horizon a window ahead, extended half a window at a time.
      if (furthest + core_.config_.round_window / 2 > iteration->round_horizon) {
        proto::Update update;
        update.mutable_extend_round_horizon()->set_iteration_id(iteration->id);
        update.mutable_extend_round_horizon()->set_horizon(furthest + core_.config_.round_window);
        if (absl::Status s = core_.Apply(update); !s.ok()) return s;
      }
    }
    for (int64_t task_id : request.completed_tasks()) {
      const auto* task = core_.state_.FindTask(task_id);
      // Only a task of the client's own iteration is its to complete.
      if (task == nullptr || task->completed || task->iteration_id != *iteration_id) continue;
      proto::Update update;
      update.mutable_complete_task()->set_task_id(task_id);
      if (absl::Status s = core_.Apply(update); !s.ok()) return s;
    }
    if (!request.completed_splits().empty()) {
      // Only splits still out are journaled: a forged heartbeat naming
      // splits never handed out leaves no trace in the journal.
      proto::Update update;
      update.mutable_complete_splits()->set_iteration_id(*iteration_id);
      const auto* iteration = core_.state_.FindIteration(*iteration_id);
      for (int64_t seq : request.completed_splits()) {
        if (core_.state_.IsSplitOutstanding(*iteration, seq)) update.mutable_complete_splits()->add_seqs(seq);
      }
      if (!update.complete_splits().seqs().empty()) {
        if (absl::Status s = core_.Apply(update); !s.ok()) return s;
      }
    }
    if (request.answered_hold() != 0) {
      if (absl::Status s = TakePositions("ClientHeartbeat", *iteration_id, request.iteration_client_id(),
                                         request.answered_hold(), request.taken_positions_cut(),
                                         request.taken_positions(), &new_tasks);
          !s.ok()) {
        return s;
      }
    }
    for (const std::string& address : request.unreachable_workers()) {
      liveness_.NoteUnreachable(*iteration_id, address, &new_tasks);
    }
    const auto* iteration = core_.state_.FindIteration(*iteration_id);
    if (core_.state_.HoldsLostSplits(*iteration)) {
      response->set_lowest_outstanding_split(core_.state_.LowestOutstandingSplit(*iteration));
    }
    if (iteration->awaiting_reports.contains(request.iteration_client_id())) {
      response->set_report_hold(iteration->hold);
      for (const auto& [seq, split] : iteration->held_splits) {
        response->add_report_splits(seq);
        response->add_report_splits(seq + std::max<int64_t>(split.count, 1));
      }
    }
    response->set_task_list(core_.task_lists_version_);
    if (request.known_task_list() == core_.task_lists_version_) {
      response->set_task_list_unchanged(true);
    } else {
      ListTasks(*iteration, response);
    }
    if (response->tasks_size() > 0) core_.client_activity_.NoteToldTasks(request.iteration_client_id());
    response->set_error_code(iteration->error_code);
    response->set_error_message(iteration->error_message);
    response->set_iteration_finished(iteration->finished);
    if (iteration->finished && iteration->error_code == 0) {
      CheckPeersAtEnd(*iteration, request.iteration_client_id(), response);
    }
    // Told the end, it has nothing more to take: its exit loses no one's.
    if (response->iteration_finished()) core_.client_activity_.NoteToldEnd(request.iteration_client_id());
    response->set_round_horizon(iteration->round_horizon);
    if (auto rounds = core_.iteration_rounds_.find(iteration->id); rounds != core_.iteration_rounds_.end()) {
      response->set_furthest_round(rounds->second);
    }
  }
  core_.PushTasks(new_tasks);
  return absl::OkStatus();
}

void ClientRpcs::ListTasks(const DispatcherState::Iteration& iteration,
                           proto::ClientHeartbeatResponse* response) {
  for (int64_t task_id : iteration.tasks) {
    const auto* task = core_.state_.FindTask(task_id);
    // Tasks of removed workers are over; the client stops reading them.
    // A failed iteration has none to read: its error says why.
    if (task->lost || iteration.collected || iteration.error_code != 0 ||
        core_.state_.FindWorker(task->worker_address) == nullptr) {
      continue;
    }
    proto::TaskInfo* info = response->add_tasks();
    info->set_task_id(task->id);
    info->set_iteration_id(task->iteration_id);
    info->set_worker_address(task->worker_address);
    info->set_starting_round(task->starting_round);
    info->set_read_secret(ReadSecretOf(task->id));
  }
  for (int64_t task_id : iteration.tasks) {
    const auto* task = core_.state_.FindTask(task_id);
    if (task->drained && !task->lost) response->add_drained_tasks(task->id);
    if (!task->lost) continue;
    proto::LostTask* lost = response->add_lost_tasks();
    lost->set_task_id(task->id);
    lost->set_worker_address(task->worker_address);
    lost->set_reason(task->lost_reason);
  }
}

void ClientRpcs::CheckPeersAtEnd(const DispatcherState::Iteration& iteration, int64_t client_id,
                                 proto::ClientHeartbeatResponse* response) const {
  for (const auto& [peer, released] : core_.client_activity_.released()) {
    if (released.iteration_id != iteration.id || !released.took_tasks) continue;
    const std::string& job_name = core_.state_.FindJob(iteration.job_id)->params.job_name();
    response->set_iteration_finished(false);
    response->set_error_code(static_cast<int>(absl::StatusCode::kDataLoss));
    response->set_error_message(absl::StrCat(
        "a consumer of job '", job_name, "' (iteration client ", peer, ") stopped heartbeating for ",
        core_.config_.client_timeout_ms,
        " ms (client_timeout_ms) while the epoch was read, and was released: the elements it had taken from "
        "the workers reached no other consumer (killed or frozen?); read the epoch again, or save and "
        "restore "
        "with exactly_once"));
    return;
  }
  // A peer silent for a while may be dead: the end waits until it is heard
  // from again or released, so that no reader ends whole while another's
  // elements were lost with it.
  const Clock::time_point now = Clock::now();
  for (int64_t peer : iteration.clients) {
    if (peer == client_id || !core_.client_activity_.WasToldTasks(peer)) continue;
    const std::optional<Clock::time_point> heard = core_.client_activity_.LastHeard(peer);
    if (heard.has_value() && now - *heard > kSilentPeerAtEnd) {
      response->set_iteration_finished(false);
      return;
    }
  }
}

const std::string& ClientRpcs::ReadSecretOf(int64_t task_id) {
  auto [secret, inserted] = core_.task_read_secrets_.try_emplace(task_id);
  if (inserted) secret->second = core_.client_secrets_.ForTask(task_id);
  return secret->second;
}

absl::Status ClientRpcs::ReleaseIterationClient(const proto::ReleaseIterationClientRequest& request,
                                                proto::ReleaseIterationClientResponse*, const Caller&) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  if (absl::Status s =
          CheckClientSecret("ReleaseIterationClient", request.iteration_client_id(), request.client_secret());
      !s.ok()) {
    return s;
  }
  NewTasks new_tasks;
  {
    absl::MutexLock lock(&core_.mu_);
    core_.client_activity_.Forget(request.iteration_client_id());
    // Releasing twice (a retry) is not an error for the caller.
    const std::optional<int64_t> iteration_id = core_.state_.IterationOfClient(request.iteration_client_id());
    if (!iteration_id.has_value()) return absl::OkStatus();
    // Also the last client's: a consumer may join the repetition later.
    if (!request.taken_positions().empty() || request.taken_positions_cut()) {
      // The release goes ahead whatever becomes of its report.
      if (absl::Status s =
              TakePositions("ReleaseIterationClient", *iteration_id, request.iteration_client_id(),
                            /*hold=*/0, request.taken_positions_cut(), request.taken_positions(), &new_tasks);
          !s.ok()) {
        spdlog::error("releasing client {}: its report of taken positions: {}", request.iteration_client_id(),
                      std::string(s.message()));
      }
    }
    proto::Update update;
    update.mutable_release_iteration_client()->set_iteration_client_id(request.iteration_client_id());
    const bool held = !core_.state_.FindIteration(*iteration_id)->held_splits.empty();
    if (absl::Status s = core_.Apply(update); !s.ok()) return s;
    // Its release may have been the answer held splits waited for.
    if (held && core_.state_.FindIteration(*iteration_id)->held_splits.empty()) {
      liveness_.AssignReturnedSplits(&new_tasks);
    }
  }
  core_.PushTasks(new_tasks);
  return absl::OkStatus();
}

absl::Status ClientRpcs::TakePositions(
    absl::string_view rpc, int64_t iteration_id, int64_t client_id, int64_t hold, bool cut,
    const google::protobuf::RepeatedPtrField<proto::SplitDelivery>& positions, NewTasks* new_tasks) {
  const auto* iteration = core_.state_.FindIteration(iteration_id);
  if (iteration == nullptr || !core_.state_.HoldsLostSplits(*iteration) || iteration->collected ||
      iteration->error_code != 0) {
    return absl::OkStatus();
  }
  // Only an awaited client's answer to the current hold counts: the answer
  // to a later hold covers an earlier one's splits too.
  if (hold != 0 && (hold != iteration->hold || !iteration->awaiting_reports.contains(client_id))) {
    return absl::OkStatus();
  }
  const std::string what = absl::StrCat(rpc, ": iteration ", iteration_id, " (a shared exactly_once read) ");
  // A release's report covers every split its client took of; a hold's,
  // only the held ones, which must all be there.
  if (cut && hold == 0) {
    spdlog::warn(
        "{}: client {} took positions of more splits than one report carries ({} numbers); a rerun of "
        "those left out would repeat them",
        std::string(rpc), client_id, kMaxTakenPositionNumbers);
  } else if (cut) {
    liveness_.FailIteration(
        iteration_id, absl::StatusCode::kResourceExhausted,
        absl::StrCat(what, "lost a task, and its client ", client_id,
                     " took positions of more splits than one report carries (", kMaxTakenPositionNumbers,
                     " numbers): a rerun could repeat those left out, so the read stops"));
    return absl::OkStatus();
  }
  // Only splits still out are journaled: the others are delivered, or
  // never handed out.
  proto::Update update;
  auto* report = update.mutable_report_taken_positions();
  int64_t reported = 0;
  for (const proto::SplitDelivery& split : positions) {
    if (!core_.state_.IsSplitOutstanding(*iteration, split.seq())) continue;
    *report->add_positions() = split;
    reported += 1 + split.delivered_size();
  }
  if (hold == 0 && reported == 0) return absl::OkStatus();
  int64_t kept = 0;
  for (const auto& [seq, ranges] : iteration->taken_positions)
    kept += 1 + 2 * static_cast<int64_t>(ranges.size());
  if (kept + reported > kMaxIterationTakenNumbers) {
    liveness_.FailIteration(
        iteration_id, absl::StatusCode::kResourceExhausted,
        absl::StrCat(what, "keeps ", kept, " numbers of positions its consumers took of splits still out; ",
                     reported, " more from client ", client_id, " would pass the ", kMaxIterationTakenNumbers,
                     " it may keep, so the read stops"));
    return absl::OkStatus();
  }
  if (absl::Status quota =
          CheckRestoreQuota(core_.state_, core_.config_,
                            core_.state_.FindJob(iteration->job_id)->params.tenant(), reported, rpc);
      !quota.ok()) {
    liveness_.FailIteration(
        iteration_id, absl::StatusCode::kResourceExhausted,
        absl::StrCat(quota.message(), "; iteration ", iteration_id,
                     " (a shared exactly_once read) stops rather than rerun its lost task's "
                     "splits without what its consumers took of them"));
    return absl::OkStatus();
  }
  report->set_iteration_id(iteration_id);
  report->set_iteration_client_id(client_id);
  report->set_hold(hold);
  const int64_t held = CountSplits(iteration->held_splits);
  if (absl::Status s = core_.Apply(update); !s.ok()) return s;
  if (held > 0 && iteration->held_splits.empty()) {
    int64_t taken = 0;
    for (const auto& [seq, ranges] : iteration->taken_positions) {
      for (const auto& [begin, end] : ranges) taken += end - begin;
    }
    spdlog::info(
        "iteration {}: every client said what it took; {} held splits run again, passing over the {} "
        "elements its consumers took of splits still out",
        iteration_id, held, taken);
    liveness_.AssignReturnedSplits(new_tasks);
  }
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
