#include "worker/cross_trainer_cache.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/element_cost.h"
#include "service/metrics.h"

namespace sluice::worker {
absl::StatusOr<CrossTrainerCache::Cursor*> CrossTrainerCache::Find(const std::string& trainer) {
  auto it = cursors_.find(trainer);
  if (it != cursors_.end()) return &it->second;
  if (trainer.empty() || trainer.size() > kMaxTrainerIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetElements: a cross-trainer cache task needs a trainer_id of 1 to ",
                     kMaxTrainerIdBytes, " bytes, got ", trainer.size()));
  }
  if (cursors_.size() >= static_cast<size_t>(kMaxTrainers)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("GetElements: trainer '", trainer,
                     "' is one too many for this cross-trainer cache task, which "
                     "already serves ",
                     kMaxTrainers, " trainers"));
  }
  return &cursors_.emplace(trainer, Cursor{.position = begin_, .sent = 0}).first->second;
}

void CrossTrainerCache::Append(const Element& element) {
  // Weighed by what it really holds: an element of empty strings weighs
  // about 150 bytes, not 0, so max_bytes bounds it too.
  const int64_t bytes = ElementCost(element);
  elements_.push_back({element, bytes});
  bytes_ += bytes;
  ++end_;
  while (bytes_ > max_bytes_ && !elements_.empty()) {
    bytes_ -= elements_.front().bytes;
    elements_.pop_front();
    ++begin_;
  }
}

void CrossTrainerCache::CountHits(int64_t elements) {
  static Counter& hits =
      ProcessMetrics()
          .AddCounter("sluice_worker_cross_trainer_hits_total",
                      "elements sent to a trainer of a cross-trainer job from what the worker "
                      "kept, without computing them again")
          .Get();
  hits.Increment(static_cast<double>(elements));
}

void CrossTrainerCache::CountSkipped(int64_t elements) {
  static Counter& skipped =
      ProcessMetrics()
          .AddCounter("sluice_worker_cross_trainer_skipped_total",
                      "elements a trainer of a cross-trainer job skipped because it fell "
                      "behind what the worker keeps")
          .Get();
  skipped.Increment(static_cast<double>(elements));
}

}  // namespace sluice::worker
