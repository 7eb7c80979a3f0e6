#include "service/job_params.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "pipeline/sharding.h"
#include "sluice/cardinality.h"

namespace sluice {

absl::StatusOr<proto::ProcessingMode> ParseProcessingMode(const std::string& name) {
  if (name == "parallel_epochs" || name.empty()) return proto::PARALLEL_EPOCHS;
  if (name == "distributed_epoch") return proto::DISTRIBUTED_EPOCH;
  return absl::InvalidArgumentError(absl::StrCat("distribute: unknown processing_mode '", name,
                                                 "' (valid: parallel_epochs, distributed_epoch)"));
}

std::string ProcessingModeName(proto::ProcessingMode mode) {
  switch (mode) {
    case proto::PARALLEL_EPOCHS:
      return "parallel_epochs";
    case proto::DISTRIBUTED_EPOCH:
      return "distributed_epoch";
    case proto::PROCESSING_MODE_UNSET:
      return "unset";
    default:
      return absl::StrCat("unknown (", static_cast<int>(mode), ")");
  }
}

absl::Status JobParamsFromDistribute(const proto::DistributeOp& op, proto::JobParams* params) {
  // Ordering by split needs the exactly_once tags.
  params->set_exactly_once(op.exactly_once() || op.deterministic());
  params->set_deterministic(op.deterministic());
  absl::StatusOr<proto::ProcessingMode> mode = ParseProcessingMode(op.processing_mode());
  if (!mode.ok()) return mode.status();
  if (op.has_cross_trainer_cache()) {
    const proto::CrossTrainerCacheOp& cache = op.cross_trainer_cache();
    if (cache.trainer_id().empty() || cache.trainer_id().size() > 128) {
      return absl::InvalidArgumentError(
          absl::StrCat("distribute: cross_trainer_cache.trainer_id must be 1 to 128 bytes, got ",
                       cache.trainer_id().size()));
    }
    if (cache.max_bytes() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "distribute: cross_trainer_cache.max_bytes must be > 0 (the bytes each worker keeps for the "
          "trainers), got ",
          cache.max_bytes()));
    }
    params->set_cross_trainer_cache_bytes(cache.max_bytes());
  }
  // Without a policy, the dispatcher derives it from the mode.
  if (op.sharding_policy().empty()) {
    params->set_processing_mode(*mode);
    return absl::OkStatus();
  }
  proto::ShardingPolicy policy = proto::SHARDING_POLICY_UNSET;
  if (!proto::ShardingPolicy_Parse("SHARDING_" + absl::AsciiStrToUpper(op.sharding_policy()), &policy) ||
      policy == proto::SHARDING_POLICY_UNSET) {
    return absl::InvalidArgumentError(
        absl::StrCat("distribute: unknown sharding_policy '", op.sharding_policy(),
                     "' (valid: OFF, DYNAMIC, FILE, DATA, FILE_OR_DATA, HINT)"));
  }
  const proto::ProcessingMode implied =
      policy == proto::SHARDING_DYNAMIC ? proto::DISTRIBUTED_EPOCH : proto::PARALLEL_EPOCHS;
  if (!op.processing_mode().empty() && *mode != implied) {
    return absl::InvalidArgumentError(
        absl::StrCat("distribute: sharding_policy ", op.sharding_policy(),
                     " does not go with processing_mode ", op.processing_mode(),
                     " (DYNAMIC is distributed_epoch; the other policies run like parallel_epochs)"));
  }
  params->set_processing_mode(implied);
  params->set_sharding_policy(policy);
  return absl::OkStatus();
}

absl::Status ResolveShardingPolicy(proto::JobParams* params) {
  const bool distributed = params->processing_mode() == proto::DISTRIBUTED_EPOCH;
  if (params->sharding_policy() == proto::SHARDING_POLICY_UNSET) {
    params->set_sharding_policy(distributed ? proto::SHARDING_DYNAMIC : proto::SHARDING_OFF);
  }
  if ((params->sharding_policy() == proto::SHARDING_DYNAMIC) != distributed) {
    return absl::InvalidArgumentError(
        absl::StrCat("job: sharding policy ", ShardingPolicyName(params->sharding_policy()),
                     " does not go with ", ProcessingModeName(params->processing_mode())));
  }
  return absl::OkStatus();
}

bool IsStaticSharding(const proto::JobParams& params) { return IsStaticPolicy(params.sharding_policy()); }

bool WholeEpochPerWorker(const proto::JobParams& params) {
  return params.processing_mode() == proto::PARALLEL_EPOCHS && !IsStaticSharding(params);
}

absl::Status CheckCrossTrainerCache(const proto::JobParams& params, int64_t max_bytes) {
  const int64_t bytes = params.cross_trainer_cache_bytes();
  if (bytes == 0) return absl::OkStatus();
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cross_trainer_cache: max_bytes must be > 0, got ", bytes));
  }
  if (max_bytes > 0 && bytes > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_trainer_cache: max_bytes ", bytes, " is more than the dispatcher allows each worker to keep (",
        max_bytes, ", its max_cross_trainer_cache_bytes)"));
  }
  if (params.job_name().empty()) {
    return absl::InvalidArgumentError(
        "cross_trainer_cache needs a job_name, which the trainers that share the job's elements give alike");
  }
  const bool sharded = params.processing_mode() == proto::DISTRIBUTED_EPOCH ||
                       (params.sharding_policy() != proto::SHARDING_POLICY_UNSET &&
                        params.sharding_policy() != proto::SHARDING_OFF);
  if (sharded) {
    return absl::FailedPreconditionError(
        "cross_trainer_cache needs parallel_epochs with sharding_policy OFF: every trainer reads every "
        "element, "
        "so the job's elements cannot be split between workers");
  }
  if (params.exactly_once() || params.deterministic()) {
    return absl::FailedPreconditionError(
        "cross_trainer_cache does not go with exactly_once or deterministic: a trainer that falls behind "
        "skips "
        "elements, so no trainer reads an exact epoch");
  }
  if (params.num_consumers() > 0) {
    return absl::FailedPreconditionError(
        "cross_trainer_cache does not go with coordinated reads (num_consumers)");
  }
  return absl::OkStatus();
}

absl::Status CheckCrossTrainerCardinality(int64_t cardinality) {
  if (cardinality == kInfiniteCardinality) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cross_trainer_cache needs an endless dataset (repeat() without a count before distribute), as tf.data "
      "does: trainers read one stream from their own positions, not epochs; this dataset has ",
      cardinality >= 0 ? absl::StrCat(cardinality, " elements")
                       : std::string("an unknown number of elements")));
}

namespace {

// Why `step` may give another order or other values
// on another run; "" when it cannot.
std::string NondeterministicStep(const proto::Step& step, bool values_too) {
  const auto unseeded_function = [](const proto::FunctionDef& fn) {
    return absl::StrContains(fn.name(), "random") && !fn.args().contains("seed");
  };
  const auto unordered = [](int64_t parallel_calls, bool deterministic) {
    return (parallel_calls > 1 || parallel_calls == -1) && !deterministic;
  };
  if (step.has_shuffle() && !step.shuffle().has_seed()) return "is a shuffle without a seed";
  if (step.has_sample_from_datasets() && !step.sample_from_datasets().has_seed()) {
    return "is sample_from_datasets without a seed";
  }
  if (step.has_list_files() && step.list_files().shuffle() && !step.list_files().has_seed()) {
    return "is list_files with shuffle and no seed";
  }
  if (step.has_image_folder() && step.image_folder().shuffle() && !step.image_folder().has_seed()) {
    return "is image_folder with shuffle and no seed";
  }
  if (values_too && step.has_map() && unseeded_function(step.map().fn())) {
    return absl::StrCat("is a map of ", step.map().fn().name(), " without a seed");
  }
  if (values_too && step.has_scan() && unseeded_function(step.scan().fn())) {
    return absl::StrCat("is a scan of ", step.scan().fn().name(), " without a seed");
  }
  if (step.has_map() && unordered(step.map().num_parallel_calls(), step.map().deterministic())) {
    return "is a parallel map with deterministic: false";
  }
  if (step.has_batch() && unordered(step.batch().num_parallel_calls(), step.batch().deterministic())) {
    return "is a parallel batch with deterministic: false";
  }
  if (step.has_interleave() &&
      unordered(step.interleave().num_parallel_calls(), step.interleave().deterministic())) {
    return "is a parallel interleave with deterministic: false";
  }
  return "";
}

}  // namespace

absl::Status CheckDeterministicPipeline(const proto::DatasetDef& def) { return CheckRepeats(def, true); }

absl::Status CheckRepeatableOrder(const proto::DatasetDef& def) { return CheckRepeats(def, false); }

absl::Status CheckRepeats(const proto::DatasetDef& def, bool values_too) {
  for (int i = 0; i < def.steps_size(); ++i) {
    const proto::Step& step = def.steps(i);
    if (std::string why = NondeterministicStep(step, values_too); !why.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("step ", i + 1, " ", why));
    }
    // Every sub-pipeline: interleave's, zip's, concatenate's, ...
    for (const SubPipeline& sub : SubPipelines(step)) {
      if (absl::Status s = CheckRepeats(*sub.def, values_too); !s.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("step ", i + 1, " (", StepName(step), ")'s ", sub.name, ": ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckExactlyOnce(const proto::JobParams& params, const proto::DatasetDef& def) {
  // deterministic implies exactly_once, and is what the user asked for.
  const std::string option = params.deterministic() ? "deterministic" : "exactly_once";
  if (params.processing_mode() != proto::DISTRIBUTED_EPOCH) {
    return absl::FailedPreconditionError(absl::StrCat(option, " needs distributed_epoch; the job is ",
                                                      ProcessingModeName(params.processing_mode())));
  }
  auto refuse = [&option](int index, const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        option,
        " runs the worker side once per split, so that every element comes from one split and is the same on "
        "every run; it takes a splittable source, then map, filter, tokenize, pack_sequences, prefetch and "
        "at "
        "most one batch or padded_batch (docs/pipeline.md): step ",
        index + 1, " ", why));
  };
  if (def.steps_size() == 0) return refuse(0, "is missing");
  const proto::Step& source = def.steps(0);
  // By its op alone: the files are listed when the splits are made.
  const bool splittable = source.has_range() || source.has_from_tensor_slices() || source.has_list_files() ||
                          source.has_image_folder() || source.has_webdataset() || source.has_text_line() ||
                          source.has_tfrecord() || source.has_fixed_length_record() ||
                          source.has_json_lines();
  if (!splittable) return refuse(0, absl::StrCat("(", StepName(source), ") cannot be split"));
  if ((source.has_image_folder() && source.image_folder().shuffle() && !source.image_folder().has_seed()) ||
      (source.has_list_files() && source.list_files().shuffle() && !source.list_files().has_seed())) {
    return refuse(0, absl::StrCat("(", StepName(source),
                                  ") shuffles without a seed: every worker and every restore must cut the "
                                  "files in one order; give it a seed"));
  }
  // One file per split, each file many records: batches would be cut at
  // every file's end.
  const bool record_files = !source.has_range() && !source.has_from_tensor_slices() &&
                            !source.has_image_folder() && !source.has_list_files();
  const auto unordered = [](int64_t parallel_calls, bool deterministic) {
    return (parallel_calls > 1 || parallel_calls == -1) && !deterministic;
  };
  bool batched = false;
  bool packed = false;
  for (int i = 1; i < def.steps_size(); ++i) {
    const proto::Step& step = def.steps(i);
    // Each split is a run of its own, whose end flushes the open rows: every
    // row holds one split's sequences, at the cost of up to num_bins part
    // rows a split (bench/README.md, "Packing per split").
    if (step.has_pack_sequences()) {
      if (batched) return refuse(i, "is pack_sequences after a batch: pack first, then batch");
      packed = true;
      continue;
    }
    if (step.has_map() && unordered(step.map().num_parallel_calls(), step.map().deterministic())) {
      return refuse(i, "is a map with deterministic: false, whose order changes from run to run");
    }
    if (step.has_batch() || step.has_padded_batch()) {
      if (batched) return refuse(i, "is a second batch: batch again after distribute");
      if (packed) {
        return refuse(i,
                      "is a batch after pack_sequences, whose rows per split vary, so that every split would "
                      "end in a short batch: batch after distribute");
      }
      if (record_files) {
        return refuse(i,
                      absl::StrCat("is a batch over ", StepName(source),
                                   ", whose splits are whole files of many records: batch after distribute"));
      }
      batched = true;
      const bool drops =
          step.has_batch() ? step.batch().drop_remainder() : step.padded_batch().drop_remainder();
      if (drops) {
        return refuse(
            i,
            "drops the remainder, which would drop a short batch of every split, not one per epoch: "
            "drop it after distribute");
      }
      if (step.has_batch() && unordered(step.batch().num_parallel_calls(), step.batch().deterministic())) {
        return refuse(i, "is a batch with deterministic: false, whose order changes from run to run");
      }
      continue;
    }
    // ignore_errors is not taken: a transient error dropped on one run of a
    // split and not on another would move elements between positions.
    // tokenize is a map of one element to one.
    if (!step.has_map() && !step.has_filter() && !step.has_prefetch() && !step.has_tokenize()) {
      return refuse(i,
                    absl::StrCat("is ", StepName(step),
                                 ", whose output depends on more than one split (shuffle the source with a "
                                 "seed instead)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
