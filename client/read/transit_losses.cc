#include "client/read/transit_losses.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/read/warnings.h"

namespace sluice::reader {

void TaskIndexGaps::Delivered(int64_t first_index, int64_t count) {
  if (first_index > next_index_) {
    if (lost_ == 0) {
      first_lost_ = next_index_;
      first_lost_end_ = first_index;
    }
    lost_ += first_index - next_index_;
  }
  next_index_ = std::max(next_index_, first_index + count);
}

int64_t TaskIndexGaps::lost() const {
  return lost_ + (ended() ? std::max<int64_t>(0, end_index_ - next_index_) : 0);
}

void TransitLosses::TaskEnded(int64_t task_id, const std::string& worker_address, const TaskIndexGaps& gaps) {
  if (gaps.lost() == 0) return;
  lost_.push_back({task_id, worker_address, gaps.lost(), gaps.first_lost(), gaps.first_lost_end()});
}

std::string TransitLosses::Describe() const {
  int64_t total = 0;
  std::string text =
      "responses were lost in transit while their workers lived on (a dropped connection or a "
      "call past its deadline):";
  for (const Lost& lost : lost_) {
    total += lost.elements;
    absl::StrAppend(&text, " worker ", lost.worker_address, " (task ", lost.task_id, ") lost ", lost.elements,
                    lost.elements == 1 ? " element" : " elements", ", the first ",
                    lost.first_end - lost.first == 1
                        ? absl::StrCat("at index ", lost.first)
                        : absl::StrCat("at indices ", lost.first, " to ", lost.first_end - 1),
                    ";");
  }
  absl::StrAppend(&text, " ", total, total == 1 ? " element" : " elements", " lost in all");
  return text;
}

absl::Status TransitLosses::Finish(bool allow_partial) const {
  if (lost_.empty()) return absl::OkStatus();
  if (allow_partial) {
    Warn(absl::StrCat(Describe(), " (accepted: allow_partial)"));
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrCat(
      Describe(),
      ". Set allow_partial to accept it (distribute(allow_partial=True) in Python, allow_partial: true in "
      "YAML, sluice read --allow-partial)"));
}

}  // namespace sluice::reader
