#include "service/worker_positions.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {

absl::StatusOr<WorkerRanges> WorkerRangesFromProto(
    const google::protobuf::RepeatedPtrField<proto::WorkerPositions>& list, const std::string& field) {
  WorkerRanges ranges;
  for (const proto::WorkerPositions& worker : list) {
    if (worker.worker_address().empty() || ranges.contains(worker.worker_address())) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": worker address '", worker.worker_address(), "' is empty or listed twice"));
    }
    absl::StatusOr<IntRanges> positions =
        RangesFromPairs(worker.positions(), 0, absl::StrCat(field, " of worker ", worker.worker_address()));
    if (!positions.ok()) return positions.status();
    ranges[worker.worker_address()] = *std::move(positions);
  }
  return ranges;
}

void AppendWorkerRanges(const WorkerRanges& ranges,
                        google::protobuf::RepeatedPtrField<proto::WorkerPositions>* list) {
  for (const auto& [address, positions] : ranges) {
    proto::WorkerPositions* worker = list->Add();
    worker->set_worker_address(address);
    AppendPairs(positions, worker->mutable_positions());
  }
}

int64_t SkippedPositions::PositionOf(int64_t index) {
  // Index i is the position past i unskipped ones: pass every range that
  // begins at or before the position reached so far.
  while (next_ < skipped_.size() && skipped_[next_].first <= index + passed_ &&
         skipped_[next_].second != kEpochEnd) {
    passed_ += skipped_[next_].second - skipped_[next_].first;
    ++next_;
  }
  return index + passed_;
}

int64_t SkippedPositions::PositionAt(int64_t index) const {
  int64_t passed = 0;
  for (const auto& [begin, end] : skipped_) {
    if (begin > index + passed || end == kEpochEnd) break;
    passed += end - begin;
  }
  return index + passed;
}

}  // namespace sluice
