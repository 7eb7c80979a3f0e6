#include "sluice/distribute.h"

#include <dlpack/dlpack.h>

#include <catch2/catch.hpp>

#include "tests/testing/test_util.h"

namespace sluice {
namespace {

ReplicaSet Cpus(int num_input_pipelines = 1, int input_pipeline_id = 0) {
  return *ReplicaSet::Create({"CPU:0", "CPU:1"}, num_input_pipelines, input_pipeline_id);
}

// Every step of one pass, as PerReplica::ToJson lines.
std::vector<std::string> StepsAsJson(const DistributedDataset& dataset) {
  std::vector<std::string> lines;
  absl::StatusOr<DistributedIterator> iterator = dataset.MakeIterator();
  REQUIRE(iterator.ok());
  while (true) {
    absl::StatusOr<PerReplica> step = iterator->GetNext();
    if (absl::IsOutOfRange(step.status())) break;
    REQUIRE(step.ok());
    lines.push_back(*step->ToJson());
  }
  return lines;
}

TEST_CASE("The reference for-loop: each replica gets its half of the global batch", "[client][distribute]") {
  // from_tensors(([1.], [1.])).repeat(4).batch(4), train_step = labels - 0.3 * features.
  Dataset dataset =
      Dataset::FromTensors({Tensor::FromVector<float>({1.0f}), Tensor::FromVector<float>({1.0f})})
          .Repeat(4)
          .Batch(4);
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(dataset, Cpus());
  REQUIRE(distributed.ok());
  int steps = 0;
  for (const PerReplica& step : *distributed) {
    ++steps;
    REQUIRE(step.size() == 2);
    for (const ReplicaValue& value : step) {
      Tensor features = *value.components[0].ToHostTensor();
      Tensor labels = *value.components[1].ToHostTensor();
      REQUIRE(features.shape() == Shape{2, 1});
      for (int64_t row = 0; row < 2; ++row) {
        CHECK(labels.values<float>()[row] - 0.3f * features.values<float>()[row] == Approx(0.7f));
      }
    }
  }
  CHECK(steps == 1);
  CHECK(distributed->loop_status().ok());
}

TEST_CASE("from_tensor_slices([1,2,3,4]).repeat().batch(4) gives {0: [1,2], 1: [3,4]}",
          "[client][distribute]") {
  Dataset dataset = Dataset::FromTensorSlices({Tensor::FromVector<int32_t>({1, 2, 3, 4})}).Repeat().Batch(4);
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(dataset, Cpus());
  REQUIRE(distributed.ok());
  absl::StatusOr<DistributedIterator> iterator = distributed->MakeIterator();
  REQUIRE(iterator.ok());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PerReplica> step = iterator->GetNext();
    REQUIRE(step.ok());
    CHECK(*step->ToJson() == "{\"CPU:0\": [1, 2], \"CPU:1\": [3, 4]}");
    CHECK(*(*step)[0].components[0].ToHostTensor() == Tensor::FromVector<int32_t>({1, 2}));
    CHECK(*(*step)[1].components[0].ToHostTensor() == Tensor::FromVector<int32_t>({3, 4}));
  }
}

TEST_CASE("A partial last batch fills replicas in order, leaving later ones empty", "[client][distribute]") {
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(Dataset::Range(5).Batch(4), Cpus());
  REQUIRE(distributed.ok());
  CHECK(StepsAsJson(*distributed) == std::vector<std::string>{"{\"CPU:0\": [0, 1], \"CPU:1\": [2, 3]}",
                                                              "{\"CPU:0\": [4], \"CPU:1\": []}"});
  // 8 rows over 4 replicas is 2 each; a last batch of 3 gives 2, 1, 0, 0.
  absl::StatusOr<DistributedDataset> four = DistributeDataset(
      Dataset::Range(11).Batch(8), *ReplicaSet::Create({"CPU:0", "CPU:1", "CPU:2", "CPU:3"}));
  REQUIRE(four.ok());
  CHECK(StepsAsJson(*four)[1] == "{\"CPU:0\": [8, 9], \"CPU:1\": [10], \"CPU:2\": [], \"CPU:3\": []}");
}

TEST_CASE("GetNextAsOptional is empty at the end, GetNext is OutOfRange", "[client][distribute]") {
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(Dataset::Range(4).Batch(2), Cpus());
  REQUIRE(distributed.ok());
  absl::StatusOr<DistributedIterator> iterator = distributed->MakeIterator();
  REQUIRE(iterator.ok());
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::optional<PerReplica>> step = iterator->GetNextAsOptional();
    REQUIRE(step.ok());
    REQUIRE(step->has_value());
    CHECK((*step)->size() == 2);
  }
  absl::StatusOr<std::optional<PerReplica>> past_end = iterator->GetNextAsOptional();
  REQUIRE(past_end.ok());
  CHECK(!past_end->has_value());
  absl::StatusOr<PerReplica> next = iterator->GetNext();
  CHECK(next.status().code() == absl::StatusCode::kOutOfRange);
  CHECK(next.status().message() == "end of input");
}

TEST_CASE("element_spec is per replica with an unknown batch dimension", "[client][distribute]") {
  // from_tensors(([1.], [2])).repeat(100).batch(16) on 2 replicas.
  Dataset dataset =
      Dataset::FromTensors({Tensor::FromVector<float>({1.0f}), Tensor::FromVector<int32_t>({2})})
          .Repeat(100)
          .Batch(16);
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(dataset, Cpus());
  REQUIRE(distributed.ok());
  REQUIRE(distributed->element_spec().size() == 2);
  for (const ElementSpec& spec : distributed->element_spec()) {
    REQUIRE(spec.components.size() == 2);
    CHECK(spec.components[0].DebugString() == "TensorSpec(shape=[?, 1], dtype=float32)");
    CHECK(spec.components[1].DebugString() == "TensorSpec(shape=[?, 1], dtype=int32)");
  }
  absl::StatusOr<DistributedIterator> iterator = distributed->MakeIterator();
  REQUIRE(iterator.ok());
  CHECK(iterator->element_spec() == distributed->element_spec());
  absl::StatusOr<PerReplica> step = iterator->GetNext();
  REQUIRE(step.ok());
  CHECK((*step)[1].components[0].shape() == Shape{8, 1});
}

TEST_CASE("DistributeDatasetsFromFunction: 2 input pipelines, whole batches per replica",
          "[client][distribute]") {
  std::vector<InputContext> seen;
  auto make_dataset = [&](const InputContext& context) -> absl::StatusOr<Dataset> {
    seen.push_back(context);
    absl::StatusOr<int64_t> batch = context.PerReplicaBatchSize(8);
    if (!batch.ok()) return batch.status();
    return Dataset::Range(16).Shard(context.num_input_pipelines, context.input_pipeline_id).Batch(*batch);
  };
  absl::StatusOr<DistributedDataset> first = DistributeDatasetsFromFunction(make_dataset, Cpus(2, 0));
  absl::StatusOr<DistributedDataset> second = DistributeDatasetsFromFunction(make_dataset, Cpus(2, 1));
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].num_input_pipelines == 2);
  CHECK(seen[0].input_pipeline_id == 0);
  CHECK(seen[0].num_replicas_in_sync == 4);
  CHECK(seen[1].input_pipeline_id == 1);
  CHECK(StepsAsJson(*first) == std::vector<std::string>{"{\"CPU:0\": [0, 2], \"CPU:1\": [4, 6]}",
                                                        "{\"CPU:0\": [8, 10], \"CPU:1\": [12, 14]}"});
  CHECK(StepsAsJson(*second) == std::vector<std::string>{"{\"CPU:0\": [1, 3], \"CPU:1\": [5, 7]}",
                                                         "{\"CPU:0\": [9, 11], \"CPU:1\": [13, 15]}"});
  // The input ends mid-step: the second replica gets an empty batch.
  absl::StatusOr<DistributedDataset> odd = DistributeDatasetsFromFunction(
      [](const InputContext&) -> absl::StatusOr<Dataset> { return Dataset::Range(6).Batch(2); }, Cpus());
  REQUIRE(odd.ok());
  CHECK(StepsAsJson(*odd) == std::vector<std::string>{"{\"CPU:0\": [0, 1], \"CPU:1\": [2, 3]}",
                                                      "{\"CPU:0\": [4, 5], \"CPU:1\": []}"});
  CHECK(
      DistributeDatasetsFromFunction(
          [](const InputContext&) -> absl::StatusOr<Dataset> { return absl::NotFoundError("no such table"); },
          Cpus())
          .status()
          .message() == "no such table");
}

TEST_CASE("Several input pipelines rebatch and shard by DATA, FILE or not at all", "[client][distribute]") {
  Dataset dataset = Dataset::Range(16).Batch(8);
  absl::StatusOr<DistributedDataset> host0 = DistributeDataset(dataset, Cpus(2, 0));
  absl::StatusOr<DistributedDataset> host1 = DistributeDataset(dataset, Cpus(2, 1));
  REQUIRE(host0.ok());
  REQUIRE(host1.ok());
  CHECK(StepsAsJson(*host0) == std::vector<std::string>{"{\"CPU:0\": [0, 2], \"CPU:1\": [4, 6]}",
                                                        "{\"CPU:0\": [8, 10], \"CPU:1\": [12, 14]}"});
  CHECK(StepsAsJson(*host1) == std::vector<std::string>{"{\"CPU:0\": [1, 3], \"CPU:1\": [5, 7]}",
                                                        "{\"CPU:0\": [9, 11], \"CPU:1\": [13, 15]}"});

  DistributeOptions off;
  off.auto_shard_policy = AutoShardPolicy::kOff;
  absl::StatusOr<DistributedDataset> unsharded = DistributeDataset(dataset, Cpus(2, 1), off);
  REQUIRE(unsharded.ok());
  CHECK(StepsAsJson(*unsharded)[0] == "{\"CPU:0\": [0, 1], \"CPU:1\": [2, 3]}");

  DistributeOptions file;
  file.auto_shard_policy = AutoShardPolicy::kFile;
  CHECK(DistributeDataset(dataset, Cpus(2, 0), file).status().message() ==
        "FILE auto-sharding needs a file source (list_files, image_folder, webdataset, text_line, "
        "json_lines, tfrecord or "
        "fixed_length_record); the pipeline starts with range");
  CHECK(DistributeDataset(Dataset::TextLine({"only.txt"}).Batch(4), Cpus(2, 0), file).status().message() ==
        "FILE auto-sharding over 2 input pipelines needs at least as many files; text_line reads 1");
}

TEST_CASE("FILE sharding gives each input pipeline every other file", "[client][distribute]") {
  testing::TempDir dir;
  std::vector<std::string> files;
  for (int f = 0; f < 4; ++f) {
    files.push_back(dir.path() + "/part" + std::to_string(f) + ".txt");
    testing::WriteFile(files.back(), "f" + std::to_string(f) + "a\nf" + std::to_string(f) + "b\n");
  }
  Dataset dataset = Dataset::TextLine(files).Batch(4);
  absl::StatusOr<DistributedDataset> host1 = DistributeDataset(dataset, Cpus(2, 1));  // AUTO picks FILE
  REQUIRE(host1.ok());
  CHECK(StepsAsJson(*host1) == std::vector<std::string>{"{\"CPU:0\": [\"f1a\"], \"CPU:1\": [\"f1b\"]}",
                                                        "{\"CPU:0\": [\"f3a\"], \"CPU:1\": [\"f3b\"]}"});
}

TEST_CASE("DistributeDataset refuses what it cannot split, saying why", "[client][distribute]") {
  CHECK(DistributeDataset(Dataset::Range(10).Batch(5), Cpus()).status().message() ==
        "global batch size 5 is not divisible by 2 replicas in sync");
  CHECK(DistributeDataset(Dataset::Range(10), Cpus()).status().message() ==
        "DistributeDataset needs the global batch size: the pipeline has no batch step; set "
        "DistributeOptions::global_batch_size (sluice: --global-batch-size)");
  DistributeOptions options;
  options.global_batch_size = 2;
  CHECK(DistributeDataset(Dataset::Range(10), Cpus(), options).status().message() ==
        "component 0 is a scalar: DistributeDataset splits each element along its first dimension, so the "
        "dataset must end in a batch");
  CHECK(DistributeDataset(Dataset::Range(10).Map("squares").Batch(2), Cpus()).status().message() ==
        "step 2 (map): unknown function 'squares'; did you mean 'square'?");
  // Batches larger than the declared global batch.
  options.global_batch_size = 4;
  absl::StatusOr<DistributedDataset> too_big =
      DistributeDataset(Dataset::Range(12).Batch(6), Cpus(), options);
  REQUIRE(too_big.ok());
  absl::StatusOr<DistributedIterator> iterator = too_big->MakeIterator();
  REQUIRE(iterator.ok());
  CHECK(iterator->GetNext().status().message() ==
        "an element has 6 rows, more than this pipeline's 2 replicas x 2 rows; is the global batch size "
        "right?");
}

TEST_CASE("Device names and replica sets", "[client][distribute]") {
  CHECK(Device::Parse("GPU:1")->name() == "GPU:1");
  CHECK(Device::Parse("/gpu:3")->name() == "GPU:3");
  CHECK(Device::Parse("/job:localhost/replica:0/task:0/device:CPU:2")->name() == "CPU:2");
  CHECK(Device::Parse("cpu:0")->name() == "CPU:0");
  CHECK(Device::Parse("cuda:1")->name() == "GPU:1");
  CHECK(Device::Parse("TPU:0").status().message() == "device 'TPU:0' is not CPU:N, GPU:N or cuda:N");
  CHECK(Device::Parse("GPU:").status().message() == "device 'GPU:' is not CPU:N, GPU:N or cuda:N");
  CHECK(Device::Parse("GPU:-1").status().message() == "device 'GPU:-1' is not CPU:N, GPU:N or cuda:N");
  CHECK(ReplicaSet::Create({}).status().message() == "a replica set needs at least one device");
  CHECK(ReplicaSet::Create({"CPU:0", "cpu:0"}).status().message() == "device CPU:0 is listed twice");
  CHECK(ReplicaSet::Create({"CPU:0"}, 2, 2).status().message() == "input_pipeline_id 2 is outside [0, 2)");
  CHECK(ReplicaSet::Create({"CPU:0"}, 0).status().message() ==
        "num_input_pipelines must be at least 1, not 0");
  ReplicaSet set = *ReplicaSet::Create({"CPU:0", "CPU:1", "CPU:2"}, 4, 3);
  CHECK(set.num_local_replicas() == 3);
  CHECK(set.num_replicas_in_sync() == 12);
  CHECK(InputContext{4, 3, 12}.PerReplicaBatchSize(48).value() == 4);
  CHECK(InputContext{4, 3, 12}.PerReplicaBatchSize(50).status().message() ==
        "global batch size 50 is not divisible by 12 replicas in sync");
}

TEST_CASE("A missing GPU is a FailedPrecondition naming it, CPU replicas still work",
          "[client][distribute]") {
  const std::string missing = "GPU:" + std::to_string(NumLocalGpus());
  absl::StatusOr<DistributedDataset> distributed =
      DistributeDataset(Dataset::Range(4).Batch(2), *ReplicaSet::Create({missing}));
  REQUIRE(distributed.ok());
  absl::StatusOr<DistributedIterator> iterator = distributed->MakeIterator();
  CHECK(iterator.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(iterator.status().message()).rfind(missing + " is not available: ", 0) == 0);
  int steps = 0;
  for (const PerReplica& step : *distributed) steps += static_cast<int>(step.size());
  CHECK(steps == 0);
  CHECK(distributed->loop_status() == iterator.status());
  if (NumLocalGpus() == 0) {
    CHECK(ReplicaSet::AllLocalGpus().status().code() == absl::StatusCode::kFailedPrecondition);
  }
}

TEST_CASE("DLPack views of CPU values share the pooled memory", "[client][distribute]") {
  Dataset dataset = Dataset::FromTensorSlices({Tensor::FromVector<double>({0.5, 1.5, 2.5, 3.5})}).Batch(4);
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(dataset, Cpus());
  REQUIRE(distributed.ok());
  absl::StatusOr<DistributedIterator> iterator = distributed->MakeIterator();
  REQUIRE(iterator.ok());
  absl::StatusOr<PerReplica> step = iterator->GetNext();
  REQUIRE(step.ok());
  absl::StatusOr<DLManagedTensor*> view = (*step)[1].components[0].ToDLPack();
  REQUIRE(view.ok());
  step = PerReplica();  // the view alone keeps the buffer
  const DLTensor& tensor = (*view)->dl_tensor;
  CHECK(tensor.device.device_type == kDLCPU);
  CHECK(tensor.ndim == 1);
  CHECK(tensor.shape[0] == 2);
  CHECK(tensor.dtype.code == kDLFloat);
  CHECK(tensor.dtype.bits == 64);
  CHECK(tensor.strides == nullptr);
  CHECK(static_cast<const double*>(tensor.data)[0] == 2.5);
  CHECK(static_cast<const double*>(tensor.data)[1] == 3.5);
  (*view)->deleter(*view);

  absl::StatusOr<DistributedDataset> strings = DistributeDataset(
      Dataset::FromTensorSlices({Tensor::FromVector<std::string>({"a", "b"})}).Batch(2), Cpus());
  absl::StatusOr<PerReplica> string_step = strings->MakeIterator()->GetNext();
  REQUIRE(string_step.ok());
  CHECK((*string_step)[0].components[0].ToDLPack().status().message() ==
        "a string tensor has no DLPack form; DLPack describes numeric tensors only");
}

}  // namespace
}  // namespace sluice
