// Static sharding of a pipeline definition: the SDK's auto-sharding of
// input pipelines and the service's FILE, DATA, FILE_OR_DATA and HINT
// sharding policies over workers both rewrite the definition here.
#ifndef SLUICE_PIPELINE_SHARDING_H_
#define SLUICE_PIPELINE_SHARDING_H_

#include <string>

#include "absl/status/status.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

enum class ShardBy {
  kFile,        // each shard reads every num_shards-th file
  kData,        // each shard keeps every num_shards-th element
  kFileOrData,  // kFile for a file source, kData otherwise
  kHint,        // fills in `shard` steps written with num_shards: -1
};

// What the error messages call the sharding and its shards, for example
// {"FILE auto-sharding", "input pipelines"} or {"FILE sharding", "workers"}.
struct ShardNames {
  std::string file_sharding;
  std::string shards;
};

// tf.data's SHARD_HINT: a `shard` step with num_shards and index -1 is a
// placeholder for the service's HINT policy; run otherwise, it keeps all.
inline constexpr int64_t kShardHint = -1;

// Rewrites `def` to produce only shard `index` of `num_shards`. kData
// inserts a `shard` step before step `data_shard_at` (the pipeline's end,
// or its batch). Errors say why a pipeline cannot be sharded that way.
absl::Status ShardDatasetDef(ShardBy by, int num_shards, int index, int data_shard_at,
                             const ShardNames& names, proto::DatasetDef* def);

// Whether the pipeline starts with a source that reads files.
bool HasFileSource(const proto::DatasetDef& def);
// The files a file reader source (text_line, tfrecord,
// fixed_length_record) lists in `files`; 0 for any other step.
int SourceFileCount(const proto::Step& source);

// The service's static policies (FILE, DATA, FILE_OR_DATA, HINT), and a
// policy's name without its prefix ("DATA").
bool IsStaticPolicy(proto::ShardingPolicy policy);
std::string ShardingPolicyName(proto::ShardingPolicy policy);

// Rewrites a worker's pipeline to run shard `index` of `num_shards` under a
// static policy (the shard step goes at the pipeline's end).
absl::Status ShardForWorker(proto::ShardingPolicy policy, int num_shards, int index, proto::DatasetDef* def);

// The op name of a step ("map"), for messages.
std::string StepName(const proto::Step& step);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_SHARDING_H_
