#include "client/replica_splitter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {

// DistributeDataset: replica i takes rows [i*b, (i+1)*b) of each global
// batch, clipped to the rows there are.
absl::Status ReplicaSplitter::SplitBatch(std::vector<Element>* step, bool* end_of_input) {
  Element batch;
  if (absl::Status status = input_->GetNext(&batch, end_of_input); !status.ok() || *end_of_input)
    return status;
  int64_t rows = -1;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Tensor& tensor = batch.components[i];
    if (tensor.rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "component ", i, " is a scalar: DistributeDataset splits each element along its first dimension"));
    }
    if (rows >= 0 && tensor.dim(0) != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("component ", i, " has ", tensor.dim(0), " rows where component 0 has ", rows));
    }
    rows = tensor.dim(0);
  }
  const int64_t capacity = rows_per_replica_ * static_cast<int64_t>(num_replicas_);
  if (rows > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("an element has ", rows, " rows, more than this pipeline's ", num_replicas_,
                     " replicas x ", rows_per_replica_, " rows; is the global batch size right?"));
  }
  step->clear();
  for (size_t replica = 0; replica < num_replicas_; ++replica) {
    const int64_t begin = std::min<int64_t>(replica * rows_per_replica_, rows);
    const int64_t end = std::min<int64_t>((replica + 1) * rows_per_replica_, rows);
    Element share;
    share.names = batch.names;
    for (const Tensor& tensor : batch.components) share.components.push_back(tensor.Slice(begin, end));
    step->push_back(std::move(share));
  }
  return absl::OkStatus();
}

// DistributeDatasetsFromFunction: each replica takes a whole element in
// turn; past the end of the input, an empty batch like the last element.
absl::Status ReplicaSplitter::WholeElements(std::vector<Element>* step, bool* end_of_input) {
  step->clear();
  while (step->size() < num_replicas_) {
    Element element;
    bool end = false;
    if (absl::Status status = input_->GetNext(&element, &end); !status.ok()) return status;
    if (end) break;
    last_ = element;
    step->push_back(std::move(element));
  }
  if (step->empty()) {
    *end_of_input = true;
    return absl::OkStatus();
  }
  while (step->size() < num_replicas_) {
    Element empty;
    empty.names = last_.names;
    for (const Tensor& tensor : last_.components) {
      if (tensor.rank() == 0) {
        return absl::InvalidArgumentError(
            "the input ended mid-step and its elements are scalars, so the remaining replicas cannot get "
            "empty batches");
      }
      empty.components.push_back(tensor.Slice(0, 0));
    }
    step->push_back(std::move(empty));
  }
  return absl::OkStatus();
}

}  // namespace sluice
