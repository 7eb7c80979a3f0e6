#include "sluice/distribute.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/auto_shard.h"
#include "client/dataset_internal.h"
#include "client/device/device_prefetcher.h"
#include "client/distributed_dataset_state.h"
#include "common/json.h"
#include "pipeline/pipeline_restore.h"

namespace sluice {

absl::StatusOr<ReplicaSet> ReplicaSet::Create(const std::vector<std::string>& device_names,
                                              int num_input_pipelines, int input_pipeline_id) {
  if (device_names.empty()) return absl::InvalidArgumentError("a replica set needs at least one device");
  if (num_input_pipelines < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_input_pipelines must be at least 1, not ", num_input_pipelines));
  }
  if (input_pipeline_id < 0 || input_pipeline_id >= num_input_pipelines) {
    return absl::InvalidArgumentError(
        absl::StrCat("input_pipeline_id ", input_pipeline_id, " is outside [0, ", num_input_pipelines, ")"));
  }
  ReplicaSet replicas;
  replicas.num_input_pipelines_ = num_input_pipelines;
  replicas.input_pipeline_id_ = input_pipeline_id;
  for (const std::string& name : device_names) {
    absl::StatusOr<Device> device = Device::Parse(name);
    if (!device.ok()) return device.status();
    if (std::find(replicas.devices_.begin(), replicas.devices_.end(), *device) != replicas.devices_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("device ", device->name(), " is listed twice"));
    }
    replicas.devices_.push_back(*device);
  }
  return replicas;
}

absl::StatusOr<ReplicaSet> ReplicaSet::AllLocalGpus(int num_input_pipelines, int input_pipeline_id) {
  const int count = NumLocalGpus();
  if (count == 0) {
    return absl::FailedPreconditionError(
        "no local GPU: this Sluice was built without CUDA or the machine has none; use CPU replicas");
  }
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back(Device{DeviceKind::kGpu, i}.name());
  return Create(names, num_input_pipelines, input_pipeline_id);
}

absl::StatusOr<int64_t> InputContext::PerReplicaBatchSize(int64_t global_batch_size) const {
  if (global_batch_size <= 0 || global_batch_size % num_replicas_in_sync != 0) {
    return absl::InvalidArgumentError(absl::StrCat("global batch size ", global_batch_size,
                                                   " is not divisible by ", num_replicas_in_sync,
                                                   " replicas in sync"));
  }
  return global_batch_size / num_replicas_in_sync;
}

int64_t ReplicaValue::num_rows() const {
  if (components.empty()) return 0;
  const Shape& shape = components[0].shape();
  return shape.empty() ? 1 : shape[0];
}

absl::StatusOr<std::string> PerReplica::ToJson() const {
  std::string out = "{";
  for (size_t replica = 0; replica < values_.size(); ++replica) {
    const ReplicaValue& value = values_[replica];
    Element element;
    element.names = value.names;
    for (const DeviceTensor& tensor : value.components) {
      absl::StatusOr<Tensor> host = tensor.ToHostTensor();
      if (!host.ok()) return host.status();
      element.components.push_back(*std::move(host));
    }
    if (replica > 0) out.append(", ");
    AppendJsonString(value.device.name(), &out);
    out.append(": ");
    out.append(ElementToJson(element));
  }
  out.push_back('}');
  return out;
}

namespace {

// Before the pipeline is built: with GPU replicas, its large buffers (and
// the network's) should land in pinned memory, which the copy engine reads
// directly; a copy into staging memory halves the rate (bench/README.md).
void PrepareHostMemory(const ReplicaSet& replicas, const DistributeOptions& options) {
  if (!options.pin_host_buffers) return;
  for (const Device& device : replicas.devices()) {
    if (device.kind == DeviceKind::kGpu) UsePinnedHostBuffers();
  }
}

std::vector<ElementSpec> PerReplicaSpecs(ElementSpec spec, int num_replicas) {
  return std::vector<ElementSpec>(static_cast<size_t>(num_replicas), std::move(spec));
}

}  // namespace

absl::StatusOr<DistributedDataset> DistributeDataset(const Dataset& dataset, const ReplicaSet& replicas,
                                                     const DistributeOptions& options) {
  PrepareHostMemory(replicas, options);
  proto::DatasetDef def = internal::DefinitionOf(dataset);
  if (def.steps_size() == 0) return absl::InvalidArgumentError("the dataset has no steps");
  int batch_index = -1;
  bool reads_named_job = false;
  for (int i = 0; i < def.steps_size(); ++i) {
    if (IsBatchStep(def.steps(i))) batch_index = i;
    if (def.steps(i).has_distribute() && !def.steps(i).distribute().job_name().empty())
      reads_named_job = true;
  }
  int64_t global_batch = options.global_batch_size;
  if (global_batch == 0 && batch_index >= 0) global_batch = BatchSizeOf(def.steps(batch_index));
  if (global_batch <= 0) {
    return absl::InvalidArgumentError(
        "DistributeDataset needs the global batch size: the pipeline has no batch step; "
        "set DistributeOptions::global_batch_size (sluice: --global-batch-size)");
  }
  InputContext context{replicas.num_input_pipelines(), replicas.input_pipeline_id(),
                       replicas.num_replicas_in_sync()};
  absl::StatusOr<int64_t> rows_per_replica = context.PerReplicaBatchSize(global_batch);
  if (!rows_per_replica.ok()) return rows_per_replica.status();

  const int num_pipelines = replicas.num_input_pipelines();
  if (num_pipelines > 1) {
    if (batch_index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("with ", num_pipelines,
                       " input pipelines, DistributeDataset rebatches the pipeline's last batch step to each "
                       "pipeline's share, and this pipeline has none"));
    }
    SetBatchSize(def.mutable_steps(batch_index), global_batch / num_pipelines);
    // A named job's consumers share its elements already.
    if (!reads_named_job) {
      if (absl::Status status = ApplyAutoShard(options.auto_shard_policy, num_pipelines,
                                               replicas.input_pipeline_id(), batch_index, &def);
          !status.ok()) {
        return status;
      }
    }
  }
  std::string fingerprint = CheckpointFingerprint(def);
  // Rebatched and sharded, it still reads the dataset's jobs: it keeps the
  // dataset's repetition counter, so distributing it again (each epoch)
  // reads the next repetition.
  internal::DatasetDefinition rebatched;
  rebatched.def = std::move(def);
  rebatched.read_repetitions = internal::DatasetAccess::State(dataset).read_repetitions;
  absl::StatusOr<DatasetPtr> built =
      internal::BuildPipeline(internal::DatasetAccess::FromState(std::move(rebatched)));
  if (!built.ok()) return built.status();

  ElementSpec spec = (*built)->element_spec();
  for (size_t i = 0; i < spec.components.size(); ++i) {
    PartialShape& shape = spec.components[i].shape;
    if (!shape.unknown_rank && shape.dims.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("component ", i,
                       " is a scalar: DistributeDataset splits each element along its first dimension, "
                       "so the dataset must end in a batch"));
    }
    // A last partial batch can split unevenly.
    if (!shape.unknown_rank) shape.dims[0] = kUnknownDim;
  }
  DistributedDataset result;
  result.state_ = std::make_shared<const internal::DistributedDatasetState>(
      internal::DistributedDatasetState{*std::move(built), *rows_per_replica, std::move(fingerprint)});
  result.replicas_ = replicas;
  result.options_ = options;
  result.element_spec_ = PerReplicaSpecs(std::move(spec), replicas.num_local_replicas());
  return result;
}

absl::StatusOr<DistributedDataset> DistributeDatasetsFromFunction(
    const std::function<absl::StatusOr<Dataset>(const InputContext&)>& make_dataset,
    const ReplicaSet& replicas, const DistributeOptions& options) {
  PrepareHostMemory(replicas, options);
  InputContext context{replicas.num_input_pipelines(), replicas.input_pipeline_id(),
                       replicas.num_replicas_in_sync()};
  absl::StatusOr<Dataset> dataset = make_dataset(context);
  if (!dataset.ok()) return dataset.status();
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(*dataset);
  if (!built.ok()) return built.status();
  DistributedDataset result;
  result.element_spec_ = PerReplicaSpecs((*built)->element_spec(), replicas.num_local_replicas());
  result.state_ = std::make_shared<const internal::DistributedDatasetState>(internal::DistributedDatasetState{
      *std::move(built), 0, CheckpointFingerprint(internal::DefinitionOf(*dataset))});
  result.replicas_ = replicas;
  result.options_ = options;
  return result;
}

}  // namespace sluice
