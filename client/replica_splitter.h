// Cuts the input pipeline's elements into steps of one element per local
// replica: DistributeDataset's rows of a global batch, or
// DistributeDatasetsFromFunction's whole elements in turn.
#ifndef SLUICE_CLIENT_REPLICA_SPLITTER_H_
#define SLUICE_CLIENT_REPLICA_SPLITTER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/dataset.h"
#include "sluice/element.h"

namespace sluice {

class ReplicaSplitter {
 public:
  // `rows_per_replica` > 0: replica i takes rows [i*b, (i+1)*b) of each
  // element; 0: each replica takes a whole element in turn. `input` must
  // outlive the splitter.
  ReplicaSplitter(IteratorBase* input, int64_t rows_per_replica, size_t num_replicas)
      : input_(input), rows_per_replica_(rows_per_replica), num_replicas_(num_replicas) {}

  // The next step, one element per replica, or *end_of_input.
  absl::Status NextStep(std::vector<Element>* step, bool* end_of_input) {
    if (rows_per_replica_ > 0) return SplitBatch(step, end_of_input);
    return WholeElements(step, end_of_input);
  }

 private:
  absl::Status SplitBatch(std::vector<Element>* step, bool* end_of_input);
  absl::Status WholeElements(std::vector<Element>* step, bool* end_of_input);

  IteratorBase* const input_;
  const int64_t rows_per_replica_;
  const size_t num_replicas_;
  Element last_;  // the last whole element, for the empty batches after it
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_REPLICA_SPLITTER_H_
