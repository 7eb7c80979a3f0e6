// The InputReader of --replicas: steps of sluice::DistributeDataset, a
// value per replica.
#ifndef SLUICE_CLI_REPLICA_READER_H_
#define SLUICE_CLI_REPLICA_READER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/input_reader.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice::cli {

// Checks the device names, then builds `def` (registering it with the
// service when it reads from one). Errors are InputReader::Open's.
absl::StatusOr<std::unique_ptr<InputReader>> OpenReplicaReader(const proto::DatasetDef& def,
                                                               const std::vector<std::string>& devices,
                                                               int64_t global_batch_size);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_REPLICA_READER_H_
