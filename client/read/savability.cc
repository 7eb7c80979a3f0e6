#include "client/read/savability.h"

#include "absl/strings/str_cat.h"
#include "pipeline/sharding.h"
#include "service/job_params.h"

namespace sluice::reader {

bool SavesWorkerPositions(const ReadSavability& read) {
  return read.params.processing_mode() == proto::PARALLEL_EPOCHS &&
         !IsStaticPolicy(read.params.sharding_policy()) && read.consumer_index < 0 &&
         read.worker_side_determinism.ok() && read.trainer_id.empty();
}

absl::Status CheckSavable(const ReadSavability& read) {
  if (!read.trainer_id.empty()) {
    return absl::FailedPreconditionError(
        "distribute: a cross_trainer_cache read cannot be saved or restored: it reads one stream from where "
        "its trainer is, shared with other trainers, not an epoch whose position could be kept");
  }
  if (read.consumer_index >= 0) {
    return absl::FailedPreconditionError(
        "distribute: a coordinated read (num_consumers) cannot be saved or restored yet");
  }
  if (IsStaticPolicy(read.params.sharding_policy())) {
    return absl::FailedPreconditionError(
        "distribute: a statically sharded read cannot be saved or restored: each worker runs its shard on "
        "its own, and workers do not save their pipelines' positions (use distributed_epoch with "
        "exactly_once: true)");
  }
  if (read.params.processing_mode() != proto::DISTRIBUTED_EPOCH) {
    if (SavesWorkerPositions(read)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "distribute: a parallel_epochs read restores only when its workers' pipeline gives the same "
        "elements in the same order on every run, so that each worker can pass over what was delivered; ",
        read.worker_side_determinism.message(),
        " (seed it or make it deterministic: true, or use distributed_epoch with exactly_once: true)"));
  }
  if (!read.params.exactly_once()) {
    return absl::FailedPreconditionError(
        "distribute: saving a distributed_epoch read needs exactly_once: true, which tags each element with "
        "its split and position so that a restore knows what was delivered");
  }
  return absl::OkStatus();
}

absl::Status CheckDistributeSavable(const proto::DatasetDef& worker_part, const proto::DistributeOp& op) {
  ReadSavability read;
  if (absl::Status s = JobParamsFromDistribute(op, &read.params); !s.ok()) return s;
  read.consumer_index = op.num_consumers() > 0 ? op.consumer_index() : -1;
  read.trainer_id = op.cross_trainer_cache().trainer_id();
  read.worker_side_determinism = CheckDeterministicPipeline(worker_part);
  if (absl::Status s = CheckSavable(read); !s.ok()) return s;
  if (read.params.exactly_once()) return CheckExactlyOnce(read.params, worker_part);
  return absl::OkStatus();
}

}  // namespace sluice::reader
