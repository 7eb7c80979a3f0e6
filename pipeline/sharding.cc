#include "pipeline/sharding.h"

#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "pipeline/split_provider.h"

namespace sluice {
namespace {

google::protobuf::RepeatedPtrField<std::string>* MutableFiles(proto::Step* step) {
  if (step->has_text_line()) return step->mutable_text_line()->mutable_files();
  if (step->has_json_lines()) return step->mutable_json_lines()->mutable_files();
  if (step->has_tfrecord()) return step->mutable_tfrecord()->mutable_files();
  if (step->has_fixed_length_record()) return step->mutable_fixed_length_record()->mutable_files();
  if (step->has_webdataset()) return step->mutable_webdataset()->mutable_files();
  return nullptr;
}

void InsertStep(proto::DatasetDef* def, int index, const proto::Step& step) {
  def->mutable_steps()->Add()->CopyFrom(step);
  for (int i = def->steps_size() - 1; i > index; --i) def->mutable_steps()->SwapElements(i, i - 1);
}

}  // namespace

std::string StepName(const proto::Step& step) {
  std::string op = StepOpName(step);
  return op.empty() ? "an empty step" : op;
}

bool IsStaticPolicy(proto::ShardingPolicy policy) {
  return policy == proto::SHARDING_FILE || policy == proto::SHARDING_DATA ||
         policy == proto::SHARDING_FILE_OR_DATA || policy == proto::SHARDING_HINT;
}

std::string ShardingPolicyName(proto::ShardingPolicy policy) {
  return proto::ShardingPolicy_Name(policy).substr(std::string_view("SHARDING_").size());
}

absl::Status ShardForWorker(proto::ShardingPolicy policy, int num_shards, int index, proto::DatasetDef* def) {
  const ShardBy by = policy == proto::SHARDING_FILE   ? ShardBy::kFile
                     : policy == proto::SHARDING_DATA ? ShardBy::kData
                     : policy == proto::SHARDING_HINT ? ShardBy::kHint
                                                      : ShardBy::kFileOrData;
  return ShardDatasetDef(by, num_shards, index, def->steps_size(),
                         {ShardingPolicyName(policy) + " sharding", "workers"}, def);
}

bool HasFileSource(const proto::DatasetDef& def) {
  if (def.steps_size() == 0) return false;
  return def.steps(0).has_list_files() || def.steps(0).has_image_folder() ||
         SourceFileCount(def.steps(0)) > 0;
}

int SourceFileCount(const proto::Step& source) {
  if (source.has_text_line()) return source.text_line().files_size();
  if (source.has_json_lines()) return source.json_lines().files_size();
  if (source.has_tfrecord()) return source.tfrecord().files_size();
  if (source.has_fixed_length_record()) return source.fixed_length_record().files_size();
  if (source.has_webdataset()) return source.webdataset().files_size();
  return 0;
}

absl::Status ShardDatasetDef(ShardBy by, int num_shards, int index, int data_shard_at,
                             const ShardNames& names, proto::DatasetDef* def) {
  if (def->steps_size() == 0) return absl::InvalidArgumentError("cannot shard an empty pipeline");
  proto::Step shard;
  shard.mutable_shard()->set_num_shards(num_shards);
  shard.mutable_shard()->set_index(index);
  if (by == ShardBy::kHint) {
    int hints = 0;
    for (proto::Step& step : *def->mutable_steps()) {
      if (step.has_shard() && step.shard().num_shards() == kShardHint) {
        step = shard;
        ++hints;
      }
    }
    if (hints == 0) {
      return absl::FailedPreconditionError(
          "HINT sharding needs a shard step with num_shards: -1 and index: -1 (SHARD_HINT); the pipeline has "
          "none");
    }
    return absl::OkStatus();
  }
  // A step that splitting by file would get wrong (concatenate, unique,
  // scan)
  // leaves FILE_OR_DATA with DATA.
  const std::string unsplittable = UnsplittableStep(*def);
  if (by == ShardBy::kFileOrData) {
    by = HasFileSource(*def) && unsplittable.empty() ? ShardBy::kFile : ShardBy::kData;
  }
  if (by == ShardBy::kData) {
    InsertStep(def, data_shard_at, shard);
    return absl::OkStatus();
  }
  if (!unsplittable.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(names.file_sharding, " cannot shard this pipeline by its source's files: ", unsplittable,
                     " (DATA sharding keeps it exact)"));
  }
  proto::Step& source = *def->mutable_steps(0);
  if (!HasFileSource(*def)) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.file_sharding,
        " needs a file source (list_files, image_folder, webdataset, text_line, json_lines, tfrecord or "
        "fixed_length_record); the pipeline starts with ",
        StepName(source)));
  }
  // image_folder keeps only its shard's files, so that it reads no other.
  if (source.has_image_folder()) {
    proto::ImageFolderOp* folder = source.mutable_image_folder();
    if (folder->num_shards() > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(names.file_sharding, ": image_folder is already sharded (", folder->shard_index(),
                       " of ", folder->num_shards(), ")"));
    }
    folder->set_num_shards(num_shards);
    folder->set_shard_index(index);
    return absl::OkStatus();
  }
  // list_files: the shard step picks files by position in the listing.
  if (source.has_list_files()) {
    InsertStep(def, 1, shard);
    return absl::OkStatus();
  }
  google::protobuf::RepeatedPtrField<std::string>* files = MutableFiles(&source);
  if (files->size() < num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(names.file_sharding, " over ", num_shards, " ",
                                                   names.shards, " needs at least as many files; ",
                                                   StepName(source), " reads ", files->size()));
  }
  google::protobuf::RepeatedPtrField<std::string> mine;
  for (int i = index; i < files->size(); i += num_shards) *mine.Add() = files->Get(i);
  *files = std::move(mine);
  return absl::OkStatus();
}

}  // namespace sluice
