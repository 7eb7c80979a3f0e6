#include "client/read/epoch_losses.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/read/warnings.h"

namespace sluice::reader {

void EpochLosses::TaskLost(int64_t task_id, const std::string& worker_address, const std::string& reason,
                           int64_t elements_read) {
  if (std::any_of(lost_.begin(), lost_.end(), [&](const Lost& l) { return l.task_id == task_id; })) return;
  lost_.push_back({task_id, worker_address, reason.empty() ? "lost" : reason, elements_read});
}

void EpochLosses::TaskDrained(int64_t task_id, const std::string& worker_address) {
  drained_[task_id].worker_address = worker_address;
}

void EpochLosses::Settle(int64_t task_id, bool read_whole, int64_t elements_read) {
  // A shared job's consumers split each task, so one reader's count cannot
  // show the task whole; the worker's end must do. A drained worker ended
  // its epoch early on purpose: its end is whole too.
  auto drained = drained_.find(task_id);
  if (drained != drained_.end() && read_whole) {
    drained->second.read_whole = true;
    drained->second.elements_read = elements_read;
  }
  const bool counted = elements_per_task_ < 0 || shared_job_ || elements_read >= elements_per_task_ ||
                       drained != drained_.end();
  if (read_whole && counted) {
    std::erase_if(lost_, [&](const Lost& l) { return l.task_id == task_id; });
    return;
  }
  for (Lost& lost : lost_) {
    if (lost.task_id == task_id) lost.elements_read = std::max(lost.elements_read, elements_read);
  }
}

std::string EpochLosses::Describe(int64_t tasks_seen) const {
  const int64_t workers = std::max<int64_t>(tasks_seen, static_cast<int64_t>(lost_.size()));
  std::string text =
      absl::StrCat("parallel_epochs: the epoch of ", lost_.size(), " of ", workers,
                   lost_.size() == 1 && workers == 1 ? " worker" : " workers", " ended early:");
  int64_t total_lost = 0;
  bool known = elements_per_task_ >= 0 && !shared_job_;
  for (const Lost& lost : lost_) {
    absl::StrAppend(&text, " worker ", lost.worker_address, " (task ", lost.task_id, ", ", lost.reason,
                    ") after ", lost.elements_read);
    if (known) {
      const int64_t missing = std::max<int64_t>(0, elements_per_task_ - lost.elements_read);
      total_lost += missing;
      absl::StrAppend(&text, " of ", elements_per_task_, " elements;");
    } else {
      absl::StrAppend(&text, " elements;");
    }
  }
  if (known) {
    absl::StrAppend(&text, " ", total_lost, " elements lost");
  } else if (shared_job_) {
    absl::StrAppend(&text, " the job is shared, so how many elements were lost is unknown");
  } else {
    absl::StrAppend(&text,
                    " the pipeline's cardinality is unknown, so how many elements were lost is unknown");
  }
  return text;
}

std::string EpochLosses::DescribeDrained() const {
  std::string text;
  const bool known = elements_per_task_ >= 0 && !shared_job_;
  for (const auto& [task_id, drained] : drained_) {
    if (!drained.read_whole || (known && drained.elements_read >= elements_per_task_)) continue;
    absl::StrAppend(&text, text.empty() ? "" : ";", " worker ", drained.worker_address, " (task ", task_id,
                    ") after ", drained.elements_read);
    absl::StrAppend(&text, known ? absl::StrCat(" of ", elements_per_task_, " elements") : " elements");
  }
  if (text.empty()) return text;
  return absl::StrCat("parallel_epochs: drained workers (scaled down) ended their epochs early, cleanly:",
                      text, shared_job_ ? " (what this consumer of the shared job read)" : "");
}

absl::Status EpochLosses::Finish(int64_t tasks_seen) const {
  if (const std::string drained = DescribeDrained(); !drained.empty()) Warn(drained);
  if (lost_.empty()) return absl::OkStatus();
  if (allow_partial_) {
    Warn(absl::StrCat(Describe(tasks_seen), " (accepted: allow_partial)"));
    return absl::OkStatus();
  }
  return absl::DataLossError(
      absl::StrCat(Describe(tasks_seen),
                   ". Set allow_partial to accept a partial epoch (distribute(allow_partial=True) "
                   "in Python, allow_partial: true in YAML, sluice read --allow-partial)"));
}

}  // namespace sluice::reader
