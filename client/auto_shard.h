// Rewrites a pipeline for one of several input pipelines (trainer hosts):
// finds its batch step, sets that step's batch size, and shards the data
// by tf.data's AutoShardPolicy.
#ifndef SLUICE_CLIENT_AUTO_SHARD_H_
#define SLUICE_CLIENT_AUTO_SHARD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "sluice/distribute.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

// batch, padded_batch or rebatch.
bool IsBatchStep(const proto::Step& step);
// The batch size of a batch step.
int64_t BatchSizeOf(const proto::Step& step);
void SetBatchSize(proto::Step* step, int64_t batch_size);

// Shards `def` for pipeline `pipeline_id` of `num_pipelines`, in place;
// `batch_index` is its last batch step, before which DATA sharding keeps
// every num_pipelines-th element. kAuto is FILE when every pipeline gets
// a file, else DATA.
absl::Status ApplyAutoShard(AutoShardPolicy policy, int num_pipelines, int pipeline_id, int batch_index,
                            proto::DatasetDef* def);

}  // namespace sluice

#endif  // SLUICE_CLIENT_AUTO_SHARD_H_
