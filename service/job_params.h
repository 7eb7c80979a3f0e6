// A job's processing mode and sharding policy, and the rules that tie them
// together, in one place for the client (which builds JobParams from a
// distribute step) and the dispatcher (which checks what it is sent).
//
//   proto::JobParams params;
//   absl::Status status = JobParamsFromDistribute(op, &params);
#ifndef SLUICE_SERVICE_JOB_PARAMS_H_
#define SLUICE_SERVICE_JOB_PARAMS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/proto/dataset.pb.h"
#include "sluice/proto/service.pb.h"

namespace sluice {

// "parallel_epochs" (also for "") or "distributed_epoch"; InvalidArgument
// naming the valid ones otherwise.
absl::StatusOr<proto::ProcessingMode> ParseProcessingMode(const std::string& name);
// The name a pipeline's processing_mode uses; "unset" for 0 and
// "unknown (N)" for values past the enum.
std::string ProcessingModeName(proto::ProcessingMode mode);

// The mode, sharding policy, exactly_once and deterministic (which implies
// exactly_once) of a distribute step: either
// of processing_mode and sharding_policy may be left out, and they must
// agree (DYNAMIC is distributed_epoch; the other policies run like
// parallel_epochs). Leaves the policy unset when the step has none.
absl::Status JobParamsFromDistribute(const proto::DistributeOp& op, proto::JobParams* params);

// Sets the policy a mode implies when none is given (OFF, or DYNAMIC for
// distributed_epoch), and refuses a policy that does not go with the mode.
absl::Status ResolveShardingPolicy(proto::JobParams* params);

// A cross-trainer cache (JobParams.cross_trainer_cache_bytes > 0) needs a
// job name the trainers share, parallel_epochs with sharding OFF (every
// trainer reads every element), and neither exactly_once nor coordinated
// reads; max_bytes above `max_bytes` (the dispatcher's
// max_cross_trainer_cache_bytes; 0: no bound) is refused. The dataset must
// also be endless, which the caller checks (it knows the cardinality):
// CheckCrossTrainerCardinality.
absl::Status CheckCrossTrainerCache(const proto::JobParams& params, int64_t max_bytes);
absl::Status CheckCrossTrainerCardinality(int64_t cardinality);

// FILE, DATA, FILE_OR_DATA or HINT: each listed worker runs its own shard.
bool IsStaticSharding(const proto::JobParams& params);
// parallel_epochs without static sharding: each worker runs the whole
// epoch, which no other worker's task can stand in for.
bool WholeEpochPerWorker(const proto::JobParams& params);

// exactly_once needs distributed_epoch and a worker side whose output
// positions within a split are the same on every run: range or
// from_tensor_slices, then map (deterministic), filter or prefetch.
// FailedPrecondition naming the step otherwise.
absl::Status CheckExactlyOnce(const proto::JobParams& params, const proto::DatasetDef& def);

// Whether a worker-side pipeline gives the same elements in the same order
// on every run, as restoring a saved parallel_epochs read needs (each
// worker's task passes over the positions delivered before): no shuffle,
// list_files or image_folder shuffle without a seed, no function with
// "random" in its name without a seed, no parallel map, batch or interleave with deterministic:
// false. FailedPrecondition naming the step otherwise.
absl::Status CheckDeterministicPipeline(const proto::DatasetDef& def);
// The same for the order of the elements alone (unseeded random functions
// change values, not which element comes where): what sharding a local
// pipeline by element across processes needs.
absl::Status CheckRepeatableOrder(const proto::DatasetDef& def);
// CheckDeterministicPipeline (values_too) or CheckRepeatableOrder.
absl::Status CheckRepeats(const proto::DatasetDef& def, bool values_too);

}  // namespace sluice

#endif  // SLUICE_SERVICE_JOB_PARAMS_H_
