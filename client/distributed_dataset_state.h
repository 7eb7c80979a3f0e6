// What a DistributedDataset holds beyond its public fields: this input
// pipeline's built dataset and how its elements split per replica. Not
// installed.
#ifndef SLUICE_CLIENT_DISTRIBUTED_DATASET_STATE_H_
#define SLUICE_CLIENT_DISTRIBUTED_DATASET_STATE_H_

#include <cstdint>
#include <string>

#include "pipeline/dataset.h"

namespace sluice::internal {

struct DistributedDatasetState {
  DatasetPtr dataset;
  // Rows of each replica's batch; 0: each replica takes whole elements in
  // turn (DistributeDatasetsFromFunction).
  int64_t rows_per_replica = 0;
  // What its saved states carry (internal::CheckpointFingerprint).
  std::string fingerprint;
};

}  // namespace sluice::internal

#endif  // SLUICE_CLIENT_DISTRIBUTED_DATASET_STATE_H_
