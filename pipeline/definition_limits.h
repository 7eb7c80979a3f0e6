// Bounds on what one pipeline definition from the network can make a
// daemon allocate, checked before anything is built: its encoded size,
// its steps (nested sub-pipelines included), and every batch_size,
// buffer_size, cycle_length and parallelism in it. A definition past one
// is InvalidArgument (ResourceExhausted for the size) naming the step and
// field, never an abort or an out-of-memory kill.
#ifndef SLUICE_PIPELINE_DEFINITION_LIMITS_H_
#define SLUICE_PIPELINE_DEFINITION_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

inline constexpr int64_t kMaxDefinitionBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxDefinitionSteps = 10000;
// Rows in one batch (and a window's size and stride): 16 Mi rows is past
// any training batch.
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 24;
// Elements a shuffle or prefetch buffer may hold.
inline constexpr int64_t kMaxBufferSize = int64_t{1} << 24;
// Sub-pipelines an interleave keeps open at once (tf.data's default is the
// number of cores), and parallel calls of any step.
inline constexpr int64_t kMaxCycleLength = int64_t{1} << 16;
inline constexpr int64_t kMaxParallelism = 4096;
// One padded_batch dimension.
inline constexpr int64_t kMaxPaddedDim = int64_t{1} << 32;

absl::Status CheckDefinitionLimits(const proto::DatasetDef& def);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_DEFINITION_LIMITS_H_
