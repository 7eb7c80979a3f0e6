// Distributed input for a trainer: each step yields one value per local
// replica, already in that replica's device memory.
//
// The counterpart of tf.distribute's experimental_distribute_dataset and
// distribute_datasets_from_function:
//
//   sluice::ReplicaSet replicas = *sluice::ReplicaSet::Create({"GPU:0", "GPU:1"});
//   sluice::Dataset dataset = sluice::Dataset::Range(1024).Batch(64).ReadFromService(
//       {.service = "grpc://127.0.0.1:5000",
//        .processing_mode = sluice::ProcessingMode::kDistributedEpoch,
//        .job_name = "train"});
//   absl::StatusOr<sluice::DistributedDataset> distributed =
//       sluice::DistributeDataset(dataset, replicas);
//   for (const sluice::PerReplica& step : *distributed) {   // one epoch
//     for (const sluice::ReplicaValue& value : step) {
//       value.WaitOnStream(my_stream);            // ordered, no host wait
//       Train(value.components[0].data(), ...);   // 32 rows on value.device
//     }
//   }
//   if (!distributed->loop_status().ok()) ...     // an error ended the loop
//
// A background thread per iterator reads the global batches, splits them
// into per-replica batches, and copies each through a pooled pinned host
// buffer into a pooled device buffer on a stream of its own per device. It
// keeps `prefetch_buffer_size` steps ready ahead of the trainer; a value's
// device buffer returns to its pool when the last copy of the value is
// dropped, so a warm iterator allocates nothing per step.
//
// CPU replicas ("CPU:0", "CPU:1", ...) work on any machine and go through
// the same pools with plain host memory. GPU replicas need a build with
// CUDA and the GPU present; otherwise creating the iterator is a
// FailedPrecondition that names the missing device.
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_DISTRIBUTE_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_DISTRIBUTE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/dataset.h"
#include "sluice/device.h"
#include "sluice/element.h"
#include "sluice/tensor.h"

struct DLManagedTensor;  // from <dlpack/dlpack.h>

namespace sluice {

namespace internal {
struct DeviceTensorAccess;
struct DeviceTensorState;
class BufferUse;
struct DistributedDatasetState;
}  // namespace internal

// The local devices that each take one replica, plus the multi-host layout:
// how many input pipelines (trainer hosts) read in sync, and which one this
// is. Every host must have the same number of local replicas.
class ReplicaSet {
 public:
  // InvalidArgument for an unknown or repeated device name, an empty list,
  // or an input_pipeline_id outside [0, num_input_pipelines).
  static absl::StatusOr<ReplicaSet> Create(const std::vector<std::string>& device_names,
                                           int num_input_pipelines = 1, int input_pipeline_id = 0);
  // Every local GPU; FailedPrecondition when there is none.
  static absl::StatusOr<ReplicaSet> AllLocalGpus(int num_input_pipelines = 1, int input_pipeline_id = 0);

  const std::vector<Device>& devices() const { return devices_; }
  int num_local_replicas() const { return static_cast<int>(devices_.size()); }
  int num_input_pipelines() const { return num_input_pipelines_; }
  int input_pipeline_id() const { return input_pipeline_id_; }
  // Replicas across all input pipelines.
  int num_replicas_in_sync() const { return num_local_replicas() * num_input_pipelines_; }

 private:
  friend class DistributedDataset;
  ReplicaSet() = default;
  std::vector<Device> devices_;
  int num_input_pipelines_ = 1;
  int input_pipeline_id_ = 0;
};

// How DistributeDataset shards the input across input pipelines when
// there are several (tf.data's AutoShardPolicy).
enum class AutoShardPolicy {
  kAuto,  // FILE when the pipeline reads at least one file per input pipeline, else DATA
  kFile,  // each pipeline reads every num_input_pipelines-th file
  kData,  // each pipeline keeps every num_input_pipelines-th element before the final batch
  kOff,   // every pipeline reads all the data
};

struct DistributeOptions {
  AutoShardPolicy auto_shard_policy = AutoShardPolicy::kAuto;
  // Steps kept ready on the devices ahead of the trainer (at least 1).
  int prefetch_buffer_size = 2;
  // The global batch size, when the pipeline does not end in a batch step
  // from which DistributeDataset can read it. 0: from the pipeline.
  int64_t global_batch_size = 0;
  // Host threads that pack each GPU batch into pinned memory (one memcpy
  // thread cannot keep up with a PCIe 5 or NVLink copy engine). 0: a
  // quarter of the cores, between 1 and 4.
  int packing_threads = 0;
  // With GPU replicas: allocate this process's large tensor buffers (1 MiB
  // and up, the network's included) in cached pinned memory, which the
  // copy engine reads directly, without a packing copy. Process-wide once
  // on; turn off to keep pinned memory for other uses.
  bool pin_host_buffers = true;
};

// What DistributeDatasetsFromFunction tells the function about the input
// pipeline it builds.
struct InputContext {
  int num_input_pipelines = 1;
  int input_pipeline_id = 0;
  int num_replicas_in_sync = 1;

  // global_batch_size / num_replicas_in_sync; InvalidArgument unless it
  // divides evenly.
  absl::StatusOr<int64_t> PerReplicaBatchSize(int64_t global_batch_size) const;
};

// One component of a replica's value, in the replica's device memory. Cheap
// to copy: copies share the buffer, which returns to its pool when the last
// one is dropped.
class DeviceTensor {
 public:
  DeviceTensor() = default;

  DType dtype() const;
  const Shape& shape() const;
  int64_t num_elements() const { return NumElements(shape()); }
  // Bytes of element storage; 0 for string tensors.
  size_t byte_size() const;
  const Device& device() const;
  // A device pointer on a GPU, a host pointer on a CPU; nullptr for string
  // tensors, which only CPU replicas carry.
  const void* data() const;

  // The values as a host Tensor: the same memory on a CPU replica, a copy
  // (after the value is ready) on a GPU.
  absl::StatusOr<Tensor> ToHostTensor() const;

  // A DLPack view for PyTorch, JAX or CuPy, without a copy. The view keeps
  // the buffer out of its pool until its deleter runs. The caller must make
  // its stream wait for the value (ReplicaValue::WaitOnStream) first.
  // InvalidArgument for string tensors, which DLPack cannot describe.
  absl::StatusOr<DLManagedTensor*> ToDLPack() const;

 private:
  friend struct internal::DeviceTensorAccess;
  // Shared by copies; set once by the prefetcher.
  std::shared_ptr<const internal::DeviceTensorState> state_;
};

// When a value's copy onto its device is complete.
class ReadyFence {
 public:
  virtual ~ReadyFence() = default;
  // Blocks the calling thread until the copy is done.
  virtual absl::Status Wait() = 0;
  // Makes `stream` (a cudaStream_t) wait for the copy without blocking the
  // host. On a CPU replica the copy is done already and this does nothing.
  virtual absl::Status WaitOnStream(void* stream) = 0;
  // The cudaEvent_t the copy records, or nullptr on a CPU replica.
  virtual void* native_event() const = 0;
};

// One replica's share of a step.
struct ReplicaValue {
  Device device;
  std::vector<DeviceTensor> components;
  ComponentNames names;               // null when components are unnamed
  std::shared_ptr<ReadyFence> ready;  // set on every value an iterator returns
  // Which streams read the value's device buffer, so that the buffer is
  // reused only after their work on it is done; null when nothing was
  // copied.
  std::shared_ptr<internal::BufferUse> buffer_use;

  absl::Status Wait() const { return ready == nullptr ? absl::OkStatus() : ready->Wait(); }
  // Makes `stream` (a cudaStream_t) wait for the copy, and records that
  // the stream reads the value (RecordStream).
  absl::Status WaitOnStream(void* stream) const;
  // Records that work enqueued on `stream` reads this value: once the value
  // is dropped, its buffer is reused only after the work enqueued on the
  // recorded streams until then is done (PyTorch's record_stream, for the
  // same reason). Work on other streams must be finished before the value
  // is dropped. A no-op on CPU replicas.
  absl::Status RecordStream(void* stream) const;
  // Rows in this replica's batch (the first dimension of its components).
  int64_t num_rows() const;
};

// One step: a value per local replica, in the order of the ReplicaSet.
class PerReplica {
 public:
  PerReplica() = default;
  explicit PerReplica(std::vector<ReplicaValue> values) : values_(std::move(values)) {}
  size_t size() const { return values_.size(); }
  const ReplicaValue& operator[](size_t replica) const { return values_[replica]; }
  std::vector<ReplicaValue>::const_iterator begin() const { return values_.begin(); }
  std::vector<ReplicaValue>::const_iterator end() const { return values_.end(); }
  // {"CPU:0": [1, 2], "CPU:1": [3, 4]}: each value's host copy as JSON.
  absl::StatusOr<std::string> ToJson() const;

 private:
  std::vector<ReplicaValue> values_;
};

class DistributedIterator {
 public:
  DistributedIterator(DistributedIterator&&) noexcept;
  DistributedIterator& operator=(DistributedIterator&&) noexcept;
  ~DistributedIterator();

  // The next step, or OutOfRange at the end of the input. Other errors
  // belong to that step; the next call goes on with the input.
  absl::StatusOr<PerReplica> GetNext();
  // The next step, or an empty optional at the end of the input.
  absl::StatusOr<std::optional<PerReplica>> GetNextAsOptional();
  // Per replica, the spec of its value.
  const std::vector<ElementSpec>& element_spec() const;
  // Where the iterator stands as of the last step GetNext returned: the
  // input pipeline's state and the elements of the steps already on their
  // way to the devices, which a restore gives first. Bytes that
  // DistributedDataset::MakeIterator(restore_from) resumes from, or that
  // MergeSavedStates merges with the other consumers' of a shared job.
  // Call it from the thread that calls GetNext. `steps_read_ahead` (0 to
  // 2): the last steps GetNext returned that the trainer has not taken yet
  // (a caller that reads ahead, as the Python iterator does), which the
  // state then gives again.
  absl::StatusOr<std::string> Save(int steps_read_ahead = 0);

 private:
  friend class DistributedDataset;
  class Impl;
  explicit DistributedIterator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class DistributedDataset {
 public:
  // Per replica, the spec of its value. DistributeDataset leaves the batch
  // dimension unknown, as a last partial batch can split unevenly.
  const std::vector<ElementSpec>& element_spec() const { return element_spec_; }
  const ReplicaSet& replicas() const { return replicas_; }

  // A new iterator; for a dataset that reads a service job, a new
  // repetition of that job.
  absl::StatusOr<DistributedIterator> MakeIterator() const;
  // The same, going on from a DistributedIterator::Save of this dataset, or
  // from a job checkpoint as consumer options.consumer_index of
  // options.num_consumers (docs/design.md, "Iterator checkpoints").
  absl::StatusOr<DistributedIterator> MakeIterator(const std::string& restore_from,
                                                   const RestoreOptions& options = {}) const;

  // Range-for support: one pass over the data, ending at the end of the
  // input or at the first error, which loop_status() then returns.
  class LoopIterator {
   public:
    using value_type = PerReplica;
    using difference_type = std::ptrdiff_t;
    const PerReplica& operator*() const { return current_; }
    LoopIterator& operator++();
    bool operator==(const LoopIterator& other) const { return done_ == other.done_; }

   private:
    friend class DistributedDataset;
    LoopIterator(std::shared_ptr<DistributedIterator> iterator, std::shared_ptr<absl::Status> status);
    std::shared_ptr<DistributedIterator> iterator_;
    std::shared_ptr<absl::Status> status_;
    PerReplica current_;
    bool done_ = true;
  };
  LoopIterator begin() const;
  LoopIterator end() const { return LoopIterator(nullptr, nullptr); }
  // Copies of a DistributedDataset share this.
  absl::Status loop_status() const { return *loop_status_; }

 private:
  friend absl::StatusOr<DistributedDataset> DistributeDataset(const Dataset&, const ReplicaSet&,
                                                              const DistributeOptions&);
  friend absl::StatusOr<DistributedDataset> DistributeDatasetsFromFunction(
      const std::function<absl::StatusOr<Dataset>(const InputContext&)>&, const ReplicaSet&,
      const DistributeOptions&);
  DistributedDataset() = default;

  // This input pipeline's built dataset, and how its elements are split.
  std::shared_ptr<const internal::DistributedDatasetState> state_;
  ReplicaSet replicas_;
  DistributeOptions options_;
  std::vector<ElementSpec> element_spec_;
  std::shared_ptr<absl::Status> loop_status_ = std::make_shared<absl::Status>();
};

// Splits each global batch of `dataset` into per-replica batches of
// global / num_replicas_in_sync rows. A partial last batch of n rows gives
// replica i rows [i*b, min((i+1)*b, n)), so later replicas may get empty
// batches. With several input pipelines, the pipeline's final batch step
// is rebatched to this pipeline's share, and the data is sharded across the
// pipelines by options.auto_shard_policy, except when the dataset reads a
// named service job, whose consumers already share the data.
absl::StatusOr<DistributedDataset> DistributeDataset(const Dataset& dataset, const ReplicaSet& replicas,
                                                     const DistributeOptions& options = {});

// `make_dataset` builds this input pipeline's dataset, whose elements are
// already per-replica batches; each local replica takes whole elements in
// turn. When the input ends mid-step, the remaining replicas get empty
// batches.
absl::StatusOr<DistributedDataset> DistributeDatasetsFromFunction(
    const std::function<absl::StatusOr<Dataset>(const InputContext&)>& make_dataset,
    const ReplicaSet& replicas, const DistributeOptions& options = {});

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_DISTRIBUTE_H_
