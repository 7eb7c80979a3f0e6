#include "sluice/distribute.h"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/device_backend.h"
#include "client/device_prefetcher.h"
#include "common/json.h"
#include "pipeline/sharding.h"

namespace sluice {

std::string Device::name() const { return absl::StrCat(kind == DeviceKind::kCpu ? "CPU:" : "GPU:", index); }

absl::StatusOr<Device> Device::Parse(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  std::string rest = lower;
  // "/job:localhost/replica:0/task:0/device:GPU:1" and "/device:GPU:1".
  if (size_t at = lower.rfind("device:"); at != std::string::npos) {
    rest = lower.substr(at + 7);
  } else if (!rest.empty() && rest[0] == '/') {
    rest = rest.substr(1);
  }
  const size_t colon = rest.find(':');
  const std::string kind = rest.substr(0, colon);
  const std::string digits = colon == std::string::npos ? "" : rest.substr(colon + 1);
  int index = -1;
  if ((kind != "cpu" && kind != "gpu") || digits.empty() ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(digits, &index)) {
    return absl::InvalidArgumentError(absl::StrCat("device '", std::string(name), "' is not CPU:N or GPU:N"));
  }
  return Device{kind == "cpu" ? DeviceKind::kCpu : DeviceKind::kGpu, index};
}

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

absl::StatusOr<Tensor> DeviceTensor::ToHostTensor() const {
  if (host_.valid()) return host_;
  Tensor host = Tensor::Uninitialized(dtype_, shape_);
  if (byte_size_ == 0) return host;
  if (absl::Status status = backend_->CopyToHost(host.mutable_raw_data(), data_, byte_size_); !status.ok()) {
    return status;
  }
  return host;
}

namespace {

absl::StatusOr<DLDataType> DlpackType(DType dtype) {
  const auto bits = static_cast<uint8_t>(dtype == DType::kBool ? 8 : DTypeSize(dtype) * 8);
  switch (dtype) {
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return DLDataType{kDLInt, bits, 1};
    case DType::kBool:  // DLPack 0.6 has no bool code: one byte, 0 or 1
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return DLDataType{kDLUInt, bits, 1};
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return DLDataType{kDLFloat, bits, 1};
    case DType::kBFloat16:
      return DLDataType{kDLBfloat, bits, 1};
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "a ", DTypeName(dtype), " tensor has no DLPack form; DLPack describes numeric tensors only"));
  }
}

// What a DLPack view owns: its shape array and a hold on the buffer.
struct DlpackOwner {
  std::vector<int64_t> shape;
  std::shared_ptr<void> lease;
  Tensor host;
};

}  // namespace

absl::StatusOr<DLManagedTensor*> DeviceTensor::ToDLPack() const {
  absl::StatusOr<DLDataType> type = DlpackType(dtype_);
  if (!type.ok()) return type.status();
  auto owner = std::make_unique<DlpackOwner>(DlpackOwner{shape_, lease_, host_});
  auto managed = std::make_unique<DLManagedTensor>();
  DLTensor& view = managed->dl_tensor;
  view.data = data_ != nullptr ? data_ : (host_.valid() ? const_cast<void*>(host_.raw_data()) : nullptr);
  view.device = DLDevice{device_.kind == DeviceKind::kGpu ? kDLCUDA : kDLCPU,
                         device_.kind == DeviceKind::kGpu ? device_.index : 0};
  view.ndim = static_cast<int32_t>(shape_.size());
  view.dtype = *type;
  view.shape = owner->shape.data();
  view.strides = nullptr;  // compact, row-major
  view.byte_offset = 0;
  managed->manager_ctx = owner.release();
  managed->deleter = [](DLManagedTensor* self) {
    delete static_cast<DlpackOwner*>(self->manager_ctx);
    delete self;
  };
  return managed.release();
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

// Splits the input pipeline's elements into steps and feeds them to the
// prefetcher.
class DistributedIterator::Impl {
 public:
  Impl(DatasetPtr dataset, std::unique_ptr<IteratorBase> input, int64_t rows_per_replica,
       std::vector<std::shared_ptr<DeviceBackend>> backends, int depth, int packing_threads,
       std::vector<ElementSpec> element_spec)
      : dataset_(std::move(dataset)),
        input_(std::move(input)),
        rows_per_replica_(rows_per_replica),
        num_replicas_(backends.size()),
        element_spec_(std::move(element_spec)),
        prefetcher_(
            std::move(backends),
            [this](std::vector<Element>* step, bool* end) { return NextStep(step, end); }, depth,
            packing_threads) {}

  absl::StatusOr<PerReplica> GetNext() { return prefetcher_.GetNext(); }
  const std::vector<ElementSpec>& element_spec() const { return element_spec_; }

 private:
  absl::Status NextStep(std::vector<Element>* step, bool* end_of_input) {
    if (rows_per_replica_ > 0) return SplitBatch(step, end_of_input);
    return WholeElements(step, end_of_input);
  }

  // DistributeDataset: replica i takes rows [i*b, (i+1)*b) of each global
  // batch, clipped to the rows there are.
  absl::Status SplitBatch(std::vector<Element>* step, bool* end_of_input) {
    Element batch;
    if (absl::Status status = input_->GetNext(&batch, end_of_input); !status.ok() || *end_of_input)
      return status;
    int64_t rows = -1;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Tensor& tensor = batch.components[i];
      if (tensor.rank() == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("component ", i,
                         " is a scalar: DistributeDataset splits each element along its first dimension"));
      }
      if (rows >= 0 && tensor.dim(0) != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat("component ", i, " has ", tensor.dim(0), " rows where component 0 has ", rows));
      }
      rows = tensor.dim(0);
    }
    const int64_t capacity = rows_per_replica_ * static_cast<int64_t>(num_replicas_);
    if (rows > capacity) {
      return absl::InvalidArgumentError(
          absl::StrCat("an element has ", rows, " rows, more than this pipeline's ", num_replicas_,
                       " replicas x ", rows_per_replica_, " rows; is the global batch size right?"));
    }
    step->clear();
    for (size_t replica = 0; replica < num_replicas_; ++replica) {
      const int64_t begin = std::min<int64_t>(replica * rows_per_replica_, rows);
      const int64_t end = std::min<int64_t>((replica + 1) * rows_per_replica_, rows);
      Element share;
      share.names = batch.names;
      for (const Tensor& tensor : batch.components) share.components.push_back(tensor.Slice(begin, end));
      step->push_back(std::move(share));
    }
    return absl::OkStatus();
  }

  // DistributeDatasetsFromFunction: each replica takes a whole element in
  // turn; past the end of the input, an empty batch like the last element.
  absl::Status WholeElements(std::vector<Element>* step, bool* end_of_input) {
    step->clear();
    while (step->size() < num_replicas_) {
      Element element;
      bool end = false;
      if (absl::Status status = input_->GetNext(&element, &end); !status.ok()) return status;
      if (end) break;
      last_ = element;
      step->push_back(std::move(element));
    }
    if (step->empty()) {
      *end_of_input = true;
      return absl::OkStatus();
    }
    while (step->size() < num_replicas_) {
      Element empty;
      empty.names = last_.names;
      for (const Tensor& tensor : last_.components) {
        if (tensor.rank() == 0) {
          return absl::InvalidArgumentError(
              "the input ended mid-step and its elements are scalars, so the remaining replicas cannot get "
              "empty batches");
        }
        empty.components.push_back(tensor.Slice(0, 0));
      }
      step->push_back(std::move(empty));
    }
    return absl::OkStatus();
  }

  const DatasetPtr dataset_;  // outlives input_
  const std::unique_ptr<IteratorBase> input_;
  const int64_t rows_per_replica_;
  const size_t num_replicas_;
  const std::vector<ElementSpec> element_spec_;
  Element last_;
  // Last: its thread calls NextStep, so it stops before the rest goes.
  DevicePrefetcher prefetcher_;
};

DistributedIterator::DistributedIterator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DistributedIterator::DistributedIterator(DistributedIterator&&) noexcept = default;
DistributedIterator& DistributedIterator::operator=(DistributedIterator&&) noexcept = default;
DistributedIterator::~DistributedIterator() = default;

absl::StatusOr<PerReplica> DistributedIterator::GetNext() { return impl_->GetNext(); }

absl::StatusOr<std::optional<PerReplica>> DistributedIterator::GetNextAsOptional() {
  absl::StatusOr<PerReplica> step = impl_->GetNext();
  if (step.ok()) return std::optional<PerReplica>(*std::move(step));
  if (absl::IsOutOfRange(step.status())) return std::optional<PerReplica>();
  return step.status();
}

const std::vector<ElementSpec>& DistributedIterator::element_spec() const { return impl_->element_spec(); }

absl::StatusOr<DistributedIterator> DistributedDataset::MakeIterator() const {
  std::vector<std::shared_ptr<DeviceBackend>> backends;
  for (const Device& device : replicas_.devices()) {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = MakeDeviceBackend(device);
    if (!backend.ok()) return backend.status();
    backends.push_back(*std::move(backend));
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> input = dataset_->MakeIterator(IteratorContext{});
  if (!input.ok()) return input.status();
  return DistributedIterator(std::make_unique<DistributedIterator::Impl>(
      dataset_, *std::move(input), rows_per_replica_, std::move(backends), options_.prefetch_buffer_size,
      options_.packing_threads, element_spec_));
}

DistributedDataset::LoopIterator::LoopIterator(std::shared_ptr<DistributedIterator> iterator,
                                               std::shared_ptr<absl::Status> status)
    : iterator_(std::move(iterator)), status_(std::move(status)), done_(iterator_ == nullptr) {}

DistributedDataset::LoopIterator& DistributedDataset::LoopIterator::operator++() {
  current_ = PerReplica();  // drop the last step's buffers before the next
  absl::StatusOr<PerReplica> step = iterator_->GetNext();
  if (step.ok()) {
    current_ = *std::move(step);
    return *this;
  }
  if (!absl::IsOutOfRange(step.status())) *status_ = step.status();
  done_ = true;
  iterator_ = nullptr;
  return *this;
}

DistributedDataset::LoopIterator DistributedDataset::begin() const {
  *loop_status_ = absl::OkStatus();
  absl::StatusOr<DistributedIterator> iterator = MakeIterator();
  if (!iterator.ok()) {
    *loop_status_ = iterator.status();
    return end();
  }
  LoopIterator loop(std::make_shared<DistributedIterator>(*std::move(iterator)), loop_status_);
  ++loop;
  return loop;
}

namespace {

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

// Shards the def for one of several input pipelines, in place.
absl::Status ApplyAutoShard(AutoShardPolicy policy, int num_pipelines, int pipeline_id, int batch_index,
                            proto::DatasetDef* def) {
  if (policy == AutoShardPolicy::kOff) return absl::OkStatus();
  ShardBy by = policy == AutoShardPolicy::kFile ? ShardBy::kFile : ShardBy::kData;
  if (policy == AutoShardPolicy::kAuto) {
    // FILE only when every pipeline gets a file.
    const proto::Step& source = def->steps(0);
    const int files = source.has_text_line()             ? source.text_line().files_size()
                      : source.has_tfrecord()            ? source.tfrecord().files_size()
                      : source.has_fixed_length_record() ? source.fixed_length_record().files_size()
                                                         : 0;
    by = source.has_list_files() || files >= num_pipelines ? ShardBy::kFile : ShardBy::kData;
  }
  return ShardDatasetDef(by, num_pipelines, pipeline_id, batch_index,
                         {"FILE auto-sharding", "input pipelines"}, def);
}

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
  proto::DatasetDef def = dataset.def();
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
  absl::StatusOr<DatasetPtr> built = Dataset::FromDef(std::move(def)).Build();
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
  result.dataset_ = *std::move(built);
  result.replicas_ = replicas;
  result.options_ = options;
  result.rows_per_replica_ = *rows_per_replica;
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
  absl::StatusOr<DatasetPtr> built = dataset->Build();
  if (!built.ok()) return built.status();
  DistributedDataset result;
  result.element_spec_ = PerReplicaSpecs((*built)->element_spec(), replicas.num_local_replicas());
  result.dataset_ = *std::move(built);
  result.replicas_ = replicas;
  result.options_ = options;
  result.rows_per_replica_ = 0;
  return result;
}

}  // namespace sluice
