// Whether a read of the service can be saved and restored, from what the
// read was asked for: the iterator's Save checks it, and Dataset::
// CheckSavable checks it from the definition alone, before training starts
// (IterableDataset(checkpointable=True)), with the same words.
#ifndef SLUICE_CLIENT_READ_SAVABILITY_H_
#define SLUICE_CLIENT_READ_SAVABILITY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "sluice/proto/dataset.pb.h"
#include "sluice/proto/service.pb.h"

namespace sluice::reader {

// What of a read decides whether it can be saved.
struct ReadSavability {
  proto::JobParams params;
  int64_t consumer_index = -1;  // coordinated reads; -1 otherwise
  std::string trainer_id;       // cross-trainer cache reads; empty otherwise
  // Why the worker side may give other elements or another order on
  // another run (CheckDeterministicPipeline); OK when it cannot.
  absl::Status worker_side_determinism;
};

// A parallel_epochs read, neither static nor coordinated, whose worker side
// repeats exactly: it records each element's (worker, position), and a
// restore has each worker pass over what was delivered from it.
bool SavesWorkerPositions(const ReadSavability& read);

// Why this read cannot be saved or restored; OK when it can.
absl::Status CheckSavable(const ReadSavability& read);

// The same for a `distribute` step over `worker_part`, without contacting
// the service, and with what the dispatcher says of an exactly_once worker
// side when it makes the job (CheckExactlyOnce).
absl::Status CheckDistributeSavable(const proto::DatasetDef& worker_part, const proto::DistributeOp& op);

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_SAVABILITY_H_
