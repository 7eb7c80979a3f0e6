// Positions in each worker's parallel_epochs epoch (its pipeline's output
// order), as ranges by worker address: what a saved read had delivered from
// each worker, which a restored iteration's tasks pass over (issue 20).
// Requests, the journal and saved states carry them as WorkerPositions.
#ifndef SLUICE_SERVICE_WORKER_POSITIONS_H_
#define SLUICE_SERVICE_WORKER_POSITIONS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "service/int_ranges.h"
#include "sluice/proto/checkpoint.pb.h"

namespace sluice {

using WorkerRanges = std::map<std::string, IntRanges>;

// The end of a range that runs to the end of the worker's epoch: the reader
// saw the epoch's end.
inline constexpr int64_t kEpochEnd = std::numeric_limits<int64_t>::max();

// Reads `list`: each address once and not empty, its pairs as
// RangesFromPairs takes them (from 0); InvalidArgument naming `field`.
absl::StatusOr<WorkerRanges> WorkerRangesFromProto(
    const google::protobuf::RepeatedPtrField<proto::WorkerPositions>& list, const std::string& field);
void AppendWorkerRanges(const WorkerRanges& ranges,
                        google::protobuf::RepeatedPtrField<proto::WorkerPositions>* list);

// Maps a task's element indices (0, 1, ... in the order it serves them) to
// positions in its worker's epoch, which the task passes over `skipped`;
// PositionOf takes indices in increasing order, PositionAt any.
class SkippedPositions {
 public:
  explicit SkippedPositions(const IntRanges& skipped = {}) : skipped_(skipped.begin(), skipped.end()) {}
  int64_t PositionOf(int64_t index);
  int64_t PositionAt(int64_t index) const;

 private:
  std::vector<std::pair<int64_t, int64_t>> skipped_;
  // The first range not yet passed, and the positions of those passed.
  size_t next_ = 0;
  int64_t passed_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_SERVICE_WORKER_POSITIONS_H_
