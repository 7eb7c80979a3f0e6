#include "service/job_params.h"

#include <catch2/catch.hpp>
#include <utility>

#include "pipeline/yaml_loader.h"
#include "sluice/cardinality.h"

namespace sluice {
namespace {

proto::DistributeOp Op(const std::string& mode, const std::string& policy) {
  proto::DistributeOp op;
  op.set_processing_mode(mode);
  op.set_sharding_policy(policy);
  return op;
}

TEST_CASE("job_params: a distribute step's mode and policy, either left out, must agree", "[service]") {
  proto::JobParams params;
  REQUIRE(JobParamsFromDistribute(Op("", ""), &params).ok());
  CHECK(params.processing_mode() == proto::PARALLEL_EPOCHS);
  CHECK(params.sharding_policy() == proto::SHARDING_POLICY_UNSET);
  params.Clear();
  REQUIRE(JobParamsFromDistribute(Op("", "dynamic"), &params).ok());
  CHECK(params.processing_mode() == proto::DISTRIBUTED_EPOCH);
  CHECK(params.sharding_policy() == proto::SHARDING_DYNAMIC);
  params.Clear();
  REQUIRE(JobParamsFromDistribute(Op("parallel_epochs", "FILE_OR_DATA"), &params).ok());
  CHECK(params.processing_mode() == proto::PARALLEL_EPOCHS);
  CHECK(params.sharding_policy() == proto::SHARDING_FILE_OR_DATA);
  CHECK(JobParamsFromDistribute(Op("epochs", ""), &params).message() ==
        "distribute: unknown processing_mode 'epochs' (valid: parallel_epochs, distributed_epoch)");
  CHECK(JobParamsFromDistribute(Op("", "policy_unset"), &params).message() ==
        "distribute: unknown sharding_policy 'policy_unset' (valid: OFF, DYNAMIC, FILE, DATA, FILE_OR_DATA, "
        "HINT)");
  CHECK(JobParamsFromDistribute(Op("distributed_epoch", "data"), &params).message() ==
        "distribute: sharding_policy data does not go with processing_mode distributed_epoch (DYNAMIC is "
        "distributed_epoch; the other policies run like parallel_epochs)");
}

TEST_CASE("job_params: the dispatcher derives a missing policy and refuses one that contradicts the mode",
          "[service]") {
  proto::JobParams params;
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  REQUIRE(ResolveShardingPolicy(&params).ok());
  CHECK(params.sharding_policy() == proto::SHARDING_DYNAMIC);
  params.set_processing_mode(proto::PARALLEL_EPOCHS);
  params.clear_sharding_policy();
  REQUIRE(ResolveShardingPolicy(&params).ok());
  CHECK(params.sharding_policy() == proto::SHARDING_OFF);
  CHECK_FALSE(IsStaticSharding(params));
  params.set_sharding_policy(proto::SHARDING_HINT);
  REQUIRE(ResolveShardingPolicy(&params).ok());
  CHECK(IsStaticSharding(params));
  params.set_sharding_policy(proto::SHARDING_DYNAMIC);
  CHECK(ResolveShardingPolicy(&params).message() ==
        "job: sharding policy DYNAMIC does not go with parallel_epochs");
  CHECK(ProcessingModeName(proto::PROCESSING_MODE_UNSET) == "unset");
  CHECK(ProcessingModeName(static_cast<proto::ProcessingMode>(9)) == "unknown (9)");
}

TEST_CASE("job_params: exactly_once needs distributed_epoch and a worker side that runs per split",
          "[service]") {
  proto::JobParams params;
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  const std::string prefix =
      "exactly_once"
      " runs the worker side once per split, so that every element comes from one split and is the same on "
      "every run; it takes a splittable source, then map, filter, tokenize, pack_sequences, prefetch and at "
      "most one batch "
      "or "
      "padded_batch (docs/pipeline.md): step ";
  proto::DatasetDef def;
  def.add_steps()->mutable_range()->set_stop(10);
  def.add_steps()->mutable_map()->mutable_fn()->set_name("square");
  CHECK(CheckExactlyOnce(params, def).ok());
  def.add_steps()->mutable_batch()->set_batch_size(2);
  def.add_steps()->mutable_map()->mutable_fn()->set_name("square");
  CHECK(CheckExactlyOnce(params, def).ok());  // one batch: the splits follow it
  def.mutable_steps(2)->mutable_batch()->set_drop_remainder(true);
  CHECK(CheckExactlyOnce(params, def).message() ==
        prefix +
            "3 drops the remainder, which would drop a short batch of every split, not one per epoch: "
            "drop it after distribute");
  def.mutable_steps(2)->mutable_batch()->set_drop_remainder(false);
  def.add_steps()->mutable_batch()->set_batch_size(2);
  CHECK(CheckExactlyOnce(params, def).message() ==
        prefix + "5 is a second batch: batch again after distribute");
  proto::DatasetDef images;
  images.add_steps()->mutable_image_folder()->set_root("/data");
  images.mutable_steps(0)->mutable_image_folder()->set_shuffle(true);
  CHECK(CheckExactlyOnce(params, images).message() ==
        prefix +
            "1 (image_folder) shuffles without a seed: every worker and every restore must cut the files in "
            "one order; give it a seed");
  images.mutable_steps(0)->mutable_image_folder()->set_seed(3);
  images.add_steps()->mutable_batch()->set_batch_size(8);
  CHECK(CheckExactlyOnce(params, images).ok());
  images.mutable_steps(1)->mutable_batch()->set_num_parallel_calls(-1);  // autotuned, unordered
  CHECK(CheckExactlyOnce(params, images).message() ==
        prefix + "2 is a batch with deterministic: false, whose order changes from run to run");
  proto::DatasetDef records;
  records.add_steps()->mutable_tfrecord()->add_files("a.tfrecord");
  records.add_steps()->mutable_batch()->set_batch_size(8);
  CHECK(CheckExactlyOnce(params, records).message() ==
        prefix +
            "2 is a batch over tfrecord, whose splits are whole files of many records: batch after "
            "distribute");
  records.mutable_steps()->RemoveLast();
  records.add_steps()->mutable_ignore_errors();
  CHECK_THAT(std::string(CheckExactlyOnce(params, records).message()),
             Catch::Matchers::EndsWith("step 2 is ignore_errors, whose output depends on more than one split "
                                       "(shuffle the source with a seed instead)"));
  proto::DatasetDef constant;
  constant.add_steps()->mutable_from_tensors();
  CHECK(CheckExactlyOnce(params, constant).message() == prefix + "1 (from_tensors) cannot be split");
  params.set_processing_mode(proto::PARALLEL_EPOCHS);
  CHECK(CheckExactlyOnce(params, def).message() ==
        "exactly_once needs distributed_epoch; the job is parallel_epochs");
}

TEST_CASE("job_params: exactly_once takes json_lines, tokenize and pack_sequences, batched after distribute",
          "[service]") {
  proto::JobParams params;
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  proto::DatasetDef def;
  def.add_steps()->mutable_json_lines()->add_files("a.jsonl");
  def.mutable_steps(0)->mutable_json_lines()->add_fields("text");
  def.add_steps()->mutable_tokenize()->set_model("m.model");
  CHECK(CheckExactlyOnce(params, def).ok());
  def.add_steps()->mutable_pack_sequences()->set_length(16);
  CHECK(CheckExactlyOnce(params, def).ok());
  def.add_steps()->mutable_batch()->set_batch_size(8);
  CHECK_THAT(
      std::string(CheckExactlyOnce(params, def).message()),
      Catch::Matchers::EndsWith("step 4 is a batch after pack_sequences, whose rows per split vary, so "
                                "that every split would end in a short batch: batch after distribute"));
  // The same over range, whose splits are batch-aligned for a batch alone.
  proto::DatasetDef ranged;
  ranged.add_steps()->mutable_range()->set_stop(100);
  ranged.add_steps()->mutable_pack_sequences()->set_length(16);
  ranged.add_steps()->mutable_batch()->set_batch_size(8);
  CHECK_THAT(
      std::string(CheckExactlyOnce(params, ranged).message()),
      Catch::Matchers::EndsWith("step 3 is a batch after pack_sequences, whose rows per split vary, so "
                                "that every split would end in a short batch: batch after distribute"));
  std::swap(*ranged.mutable_steps(1), *ranged.mutable_steps(2));
  CHECK_THAT(std::string(CheckExactlyOnce(params, ranged).message()),
             Catch::Matchers::EndsWith("step 3 is pack_sequences after a batch: pack first, then batch"));
}

TEST_CASE("job_params: deterministic implies exactly_once and says so in its refusals", "[service]") {
  proto::DistributeOp op = Op("distributed_epoch", "");
  op.set_deterministic(true);
  proto::JobParams params;
  REQUIRE(JobParamsFromDistribute(op, &params).ok());
  CHECK(params.deterministic());
  CHECK(params.exactly_once());
  proto::DatasetDef def;
  def.add_steps()->mutable_range()->set_stop(10);
  def.add_steps()->mutable_shuffle()->set_buffer_size(4);
  CHECK(CheckExactlyOnce(params, def).message() ==
        "deterministic"
        " runs the worker side once per split, so that every element comes from one split and is the same on "
        "every run; it takes a splittable source, then map, filter, tokenize, pack_sequences, prefetch and "
        "at most one batch "
        "or "
        "padded_batch (docs/pipeline.md): step "
        "2 is shuffle, whose output depends on more than one split (shuffle the source with a seed instead)");
}

TEST_CASE("job_params: a pipeline repeats exactly unless something in it is unseeded or unordered",
          "[service]") {
  proto::DatasetDef def;
  def.add_steps()->mutable_range()->set_stop(10);
  proto::ShuffleOp* shuffle = def.add_steps()->mutable_shuffle();
  shuffle->set_buffer_size(4);
  shuffle->set_seed(1);
  proto::MapOp* map = def.add_steps()->mutable_map();
  map->mutable_fn()->set_name("random_crop");
  (*map->mutable_fn()->mutable_args())["seed"].set_i(7);
  map->set_num_parallel_calls(4);
  map->set_deterministic(true);
  CHECK(CheckDeterministicPipeline(def).ok());

  proto::DatasetDef unseeded = def;
  unseeded.mutable_steps(1)->mutable_shuffle()->clear_seed();
  CHECK(CheckDeterministicPipeline(unseeded).message() == "step 2 is a shuffle without a seed");
  unseeded = def;
  unseeded.mutable_steps(2)->mutable_map()->mutable_fn()->mutable_args()->erase("seed");
  CHECK(CheckDeterministicPipeline(unseeded).message() == "step 3 is a map of random_crop without a seed");
  unseeded.mutable_steps(2)->mutable_map()->mutable_fn()->set_name("decode_and_random_crop");
  CHECK(CheckDeterministicPipeline(unseeded).message() ==
        "step 3 is a map of decode_and_random_crop without a seed");
  unseeded = def;
  unseeded.mutable_steps(2)->mutable_map()->set_deterministic(false);
  CHECK(CheckDeterministicPipeline(unseeded).message() ==
        "step 3 is a parallel map with deterministic: false");

  proto::DatasetDef outer;
  outer.add_steps()->mutable_list_files()->add_pattern("/data/*");
  proto::InterleaveOp* interleave = outer.add_steps()->mutable_interleave();
  *interleave->mutable_pipeline() = unseeded;
  CHECK(CheckDeterministicPipeline(outer).message() ==
        "step 2 (interleave)'s pipeline: step 3 is a parallel map with deterministic: false");
  outer.mutable_steps(0)->mutable_list_files()->set_shuffle(true);
  CHECK(CheckDeterministicPipeline(outer).message() == "step 1 is list_files with shuffle and no seed");
}

// range(stop), and range(5) with a shuffle of no seed.
proto::DatasetDef RangeDef(int64_t stop) {
  proto::DatasetDef def;
  def.add_steps()->mutable_range()->set_stop(stop);
  return def;
}
proto::DatasetDef UnseededDef() {
  proto::DatasetDef def = RangeDef(5);
  def.add_steps()->mutable_shuffle()->set_buffer_size(2);
  return def;
}

TEST_CASE("job_params: every sub-pipeline is checked, whatever op holds it", "[service]") {
  proto::DatasetDef def = RangeDef(3);
  *def.add_steps()->mutable_concatenate()->mutable_pipeline() = UnseededDef();
  CHECK(CheckDeterministicPipeline(def).message() ==
        "step 2 (concatenate)'s pipeline: step 2 is a shuffle without a seed");
  def = RangeDef(3);
  *def.add_steps()->mutable_flat_map()->mutable_pipeline() = UnseededDef();
  CHECK(CheckDeterministicPipeline(def).message() ==
        "step 2 (flat_map)'s pipeline: step 2 is a shuffle without a seed");

  proto::DatasetDef chosen;
  proto::ChooseFromDatasetsOp* choose = chosen.add_steps()->mutable_choose_from_datasets();
  *choose->add_datasets() = RangeDef(3);
  *choose->add_datasets() = UnseededDef();
  *choose->mutable_choice_pipeline() = RangeDef(2);
  CHECK(CheckDeterministicPipeline(chosen).message() ==
        "step 1 (choose_from_datasets)'s datasets 2: step 2 is a shuffle without a seed");
  *choose->mutable_datasets(1) = RangeDef(4);
  CHECK(CheckDeterministicPipeline(chosen).ok());
  *choose->mutable_choice_pipeline() = UnseededDef();
  CHECK(CheckDeterministicPipeline(chosen).message() ==
        "step 1 (choose_from_datasets)'s choice_pipeline: step 2 is a shuffle without a seed");

  proto::DatasetDef zipped;
  *zipped.add_steps()->mutable_zip()->add_datasets() = RangeDef(3);
  *zipped.mutable_steps(0)->mutable_zip()->add_datasets() = UnseededDef();
  CHECK(CheckDeterministicPipeline(zipped).message() ==
        "step 1 (zip)'s datasets 2: step 2 is a shuffle without a seed");
}

TEST_CASE("job_params: a scan of a random function needs its seed", "[service]") {
  proto::DatasetDef def = RangeDef(3);
  proto::ScanOp* scan = def.add_steps()->mutable_scan();
  scan->mutable_fn()->set_name("random_walk");
  CHECK(CheckDeterministicPipeline(def).message() == "step 2 is a scan of random_walk without a seed");
  CHECK(CheckRepeatableOrder(def).ok());
  (*scan->mutable_fn()->mutable_args())["seed"].set_i(1);
  CHECK(CheckDeterministicPipeline(def).ok());
}

TEST_CASE("job_params: sample_from_datasets repeats exactly only with a seed", "[service]") {
  proto::DatasetDef sampled;
  proto::SampleFromDatasetsOp* sample = sampled.add_steps()->mutable_sample_from_datasets();
  *sample->add_datasets() = RangeDef(3);
  *sample->add_datasets() = RangeDef(4);
  CHECK(CheckDeterministicPipeline(sampled).message() == "step 1 is sample_from_datasets without a seed");
  sample->set_seed(3);
  CHECK(CheckDeterministicPipeline(sampled).ok());
}

}  // namespace
TEST_CASE("job_params: cross_trainer_cache from YAML, and what it needs", "[service][cross_trainer]") {
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(
      "pipeline:\n"
      "  - range: 10\n"
      "  - repeat\n"
      "  - distribute: {service: \"grpc://127.0.0.1:1\", job_name: sweep,\n"
      "                 cross_trainer_cache: {trainer_id: lr-0.1, max_bytes: 4096}}\n",
      "sweep.yaml", ".", {.validate = false});
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  REQUIRE(loaded->def.steps_size() == 3);
  REQUIRE(loaded->def.steps(2).has_distribute());
  const proto::DistributeOp& op = loaded->def.steps(2).distribute();
  CHECK(op.cross_trainer_cache().trainer_id() == "lr-0.1");
  CHECK(op.cross_trainer_cache().max_bytes() == 4096);
  proto::JobParams params;
  REQUIRE(JobParamsFromDistribute(op, &params).ok());
  CHECK(params.cross_trainer_cache_bytes() == 4096);
  params.set_job_name("sweep");
  CHECK(CheckCrossTrainerCache(params, 4096).ok());
  CHECK(CheckCrossTrainerCache(params, 4095) ==
        absl::InvalidArgumentError(
            "cross_trainer_cache: max_bytes 4096 is more than the dispatcher allows each "
            "worker to keep (4095, its max_cross_trainer_cache_bytes)"));

  proto::JobParams nameless = params;
  nameless.clear_job_name();
  CHECK(CheckCrossTrainerCache(nameless, 0).code() == absl::StatusCode::kInvalidArgument);
  proto::JobParams distributed = params;
  distributed.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  CHECK(CheckCrossTrainerCache(distributed, 0) ==
        absl::FailedPreconditionError(
            "cross_trainer_cache needs parallel_epochs with sharding_policy OFF: every "
            "trainer reads every element, so the job's elements cannot be split "
            "between workers"));
  proto::JobParams static_shards = params;
  static_shards.set_sharding_policy(proto::SHARDING_DATA);
  CHECK(CheckCrossTrainerCache(static_shards, 0).code() == absl::StatusCode::kFailedPrecondition);
  proto::JobParams exact = params;
  exact.set_exactly_once(true);
  CHECK(CheckCrossTrainerCache(exact, 0).code() == absl::StatusCode::kFailedPrecondition);
  proto::JobParams coordinated = params;
  coordinated.set_num_consumers(2);
  CHECK(CheckCrossTrainerCache(coordinated, 0) ==
        absl::FailedPreconditionError(
            "cross_trainer_cache does not go with coordinated reads (num_consumers)"));

  CHECK(CheckCrossTrainerCardinality(kInfiniteCardinality).ok());
  CHECK(
      CheckCrossTrainerCardinality(10).message() ==
      "cross_trainer_cache needs an endless dataset (repeat() without a count before distribute), as tf.data "
      "does: trainers read one stream from their own positions, not epochs; this dataset has 10 elements");
  CHECK(CheckCrossTrainerCardinality(kUnknownCardinality).code() == absl::StatusCode::kFailedPrecondition);

  proto::DistributeOp empty_id = op;
  empty_id.mutable_cross_trainer_cache()->clear_trainer_id();
  CHECK(JobParamsFromDistribute(empty_id, &params).message() ==
        "distribute: cross_trainer_cache.trainer_id must be 1 to 128 bytes, got 0");
  proto::DistributeOp no_bytes = op;
  no_bytes.mutable_cross_trainer_cache()->set_max_bytes(0);
  CHECK(JobParamsFromDistribute(no_bytes, &params).code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace sluice
