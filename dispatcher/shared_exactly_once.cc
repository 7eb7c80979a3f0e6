#include "dispatcher/shared_exactly_once.h"

#include "absl/strings/str_cat.h"

namespace sluice::dispatcher {
namespace {

// An exactly_once distributed_epoch read whose clients share its tasks.
bool SharesTasks(const proto::JobParams& params) {
  return params.processing_mode() == proto::DISTRIBUTED_EPOCH && params.exactly_once() &&
         params.num_consumers() == 0;
}

std::string JobName(const DispatcherState::Job& job) {
  return job.params.job_name().empty() ? absl::StrCat("anonymous job ", job.id)
                                       : absl::StrCat("job '", job.params.job_name(), "'");
}

constexpr char kWhatToDo[] =
    "read such a job with coordinated reads (num_consumers on distribute), with one consumer per job "
    "(distinct job_name values), or save every consumer's state (Iterator::Save) and restore their merged "
    "checkpoint (sluice checkpoint merge) on a new job";

}  // namespace

std::optional<std::string> SharedExactlyOnceBreak(const DispatcherState& state,
                                                  const DispatcherState::Task& task,
                                                  const std::string& reason) {
  if (task.completed || task.lost) return std::nullopt;
  const DispatcherState::Iteration* iteration = state.FindIteration(task.iteration_id);
  if (iteration == nullptr || iteration->collected || iteration->error_code != 0 ||
      !iteration->several_clients) {
    return std::nullopt;
  }
  const DispatcherState::Job* job = state.FindJob(iteration->job_id);
  if (job == nullptr || !SharesTasks(job->params) || state.HoldsLostSplits(*iteration)) return std::nullopt;
  return absl::StrCat(
      JobName(*job), " (repetition ", iteration->repetition, ", iteration ", iteration->id,
      ") is read exactly_once by several consumers, and its task ", task.id, " on worker ",
      task.worker_address, " was lost (", reason,
      ") before its elements were all read. Its splits would run again, and no consumer knows which of "
      "their elements the others already delivered, so some would repeat or be skipped: the read stops "
      "instead of breaking exactly_once. To survive lost workers, ",
      kWhatToDo);
}

absl::Status CheckJoinAfterLoss(const DispatcherState& state, const DispatcherState::Iteration& iteration) {
  const DispatcherState::Job* job = state.FindJob(iteration.job_id);
  if (job == nullptr || !SharesTasks(job->params) || state.HoldsLostSplits(iteration) || iteration.finished ||
      iteration.collected || iteration.error_code != 0) {
    return absl::OkStatus();
  }
  for (int64_t id : iteration.tasks) {
    const DispatcherState::Task* task = state.FindTask(id);
    if (task == nullptr || !task->lost) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        JobName(*job), " repetition ", iteration.repetition, " lost task ", task->id, " on worker ",
        task->worker_address, " (", task->lost_reason,
        ") while one consumer read it exactly_once; that consumer reads the lost task's splits again, "
        "dropping what it delivered before, and another consumer joining now could deliver those "
        "elements again. Start every consumer of a shared job before a worker is lost, or ",
        kWhatToDo));
  }
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
