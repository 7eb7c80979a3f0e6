// The dataset a `distribute` step becomes in the reading process: it reads
// the job's elements from the service's workers. Loading the client library
// registers it as the builder's DistributeFactory.
#ifndef SLUICE_CLIENT_READ_DATA_SERVICE_DATASET_H_
#define SLUICE_CLIENT_READ_DATA_SERVICE_DATASET_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "pipeline/dataset.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice::reader {

// Registers `worker_part` with the dispatcher named in `op` (retrying while
// the dispatcher is not up yet) and returns a dataset whose every iterator
// takes the job's next repetition from `repetitions` (the counter that the
// dataset object and its copies share).
absl::StatusOr<DatasetPtr> MakeDataServiceDataset(const proto::DatasetDef& worker_part,
                                                  const proto::DistributeOp& op,
                                                  std::shared_ptr<std::atomic<int64_t>> repetitions);

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_DATA_SERVICE_DATASET_H_
