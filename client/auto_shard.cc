#include "client/auto_shard.h"

#include "pipeline/sharding.h"

namespace sluice {

bool IsBatchStep(const proto::Step& step) {
  return step.has_batch() || step.has_padded_batch() || step.has_rebatch();
}

int64_t BatchSizeOf(const proto::Step& step) {
  if (step.has_batch()) return step.batch().batch_size();
  if (step.has_padded_batch()) return step.padded_batch().batch_size();
  return step.rebatch().batch_size();
}

void SetBatchSize(proto::Step* step, int64_t batch_size) {
  if (step->has_batch()) step->mutable_batch()->set_batch_size(batch_size);
  if (step->has_padded_batch()) step->mutable_padded_batch()->set_batch_size(batch_size);
  if (step->has_rebatch()) step->mutable_rebatch()->set_batch_size(batch_size);
}

absl::Status ApplyAutoShard(AutoShardPolicy policy, int num_pipelines, int pipeline_id, int batch_index,
                            proto::DatasetDef* def) {
  if (policy == AutoShardPolicy::kOff) return absl::OkStatus();
  ShardBy by = policy == AutoShardPolicy::kFile ? ShardBy::kFile : ShardBy::kData;
  if (policy == AutoShardPolicy::kAuto) {
    // FILE only when every pipeline gets a file.
    const proto::Step& source = def->steps(0);
    by = source.has_list_files() || source.has_image_folder() || SourceFileCount(source) >= num_pipelines
             ? ShardBy::kFile
             : ShardBy::kData;
  }
  return ShardDatasetDef(by, num_pipelines, pipeline_id, batch_index,
                         {"FILE auto-sharding", "input pipelines"}, def);
}

}  // namespace sluice
