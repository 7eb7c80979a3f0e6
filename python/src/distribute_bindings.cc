// sluice.distribute_dataset and distribute_datasets_from_function: the
// SDK's DistributedDataset, whose steps are dicts of one value per
// replica, keyed by the device names as the caller wrote them.
//
// A CPU replica's value is NumPy arrays over the SDK's pooled buffers
// (each array keeps its buffer out of the pool while it lives); a GPU
// replica's is DeviceArrays, which torch.from_dlpack,
// CuPy or JAX take without a copy.
#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "python/src/bindings.h"
#include "python/src/read_ahead.h"
#include "python/src/status.h"
#include "python/src/values.h"
#include "sluice/dataset.h"
#include "sluice/distribute.h"

namespace sluice::python {
namespace py = pybind11;
namespace {

constexpr char kDlpackCapsuleName[] = "dltensor";

// One component of a replica's value, on the replica's device.
class DeviceArray {
 public:
  DeviceArray(DeviceTensor tensor, std::shared_ptr<const ReplicaValue> value)
      : tensor_(std::move(tensor)), value_(std::move(value)) {}

  py::tuple shape() const { return py::cast(tensor_.shape()); }
  std::string dtype() const { return NumpyDTypeName(tensor_.dtype()); }
  std::string device() const { return tensor_.device().name(); }

  // The DLPack protocol. `stream` is the consumer's CUDA stream as an
  // integer (1: the legacy default stream, 2: the per-thread one; CUDA's
  // own handles for those), which is made to wait for the copy and is
  // recorded as a reader of the buffer; None waits on the host.
  py::capsule Dlpack(std::optional<intptr_t> stream) const {
    {
      py::gil_scoped_release release;
      ThrowIfError(stream.has_value() ? value_->WaitOnStream(reinterpret_cast<void*>(*stream))
                                      : value_->Wait());
    }
    DLManagedTensor* managed = ValueOrThrow(tensor_.ToDLPack());
    PyObject* capsule = PyCapsule_New(managed, kDlpackCapsuleName, [](PyObject* object) {
      // A consumer renames the capsule once it owns the tensor; one never
      // consumed is freed here.
      if (!PyCapsule_IsValid(object, kDlpackCapsuleName)) return;
      auto* unused = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(object, kDlpackCapsuleName));
      if (unused->deleter != nullptr) unused->deleter(unused);
    });
    if (capsule == nullptr) {
      if (managed->deleter != nullptr) managed->deleter(managed);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(capsule);
  }

  py::tuple DlpackDevice() const {
    const Device& device = tensor_.device();
    return py::make_tuple(static_cast<int>(device.kind == DeviceKind::kGpu ? kDLCUDA : kDLCPU), device.index);
  }

  // A host copy (the same memory on a CPU replica).
  py::object ToNumpy() const {
    absl::StatusOr<Tensor> host;
    {
      py::gil_scoped_release release;
      host = tensor_.ToHostTensor();
    }
    return TensorToPython(ValueOrThrow(std::move(host)));
  }

  const DeviceTensor& tensor() const { return tensor_; }

 private:
  DeviceTensor tensor_;
  std::shared_ptr<const ReplicaValue> value_;  // its fence and buffer use
};

py::object ComponentToPython(const DeviceTensor& tensor, const std::shared_ptr<const ReplicaValue>& value) {
  if (tensor.device().kind == DeviceKind::kGpu) return py::cast(DeviceArray(tensor, value));
  // A CPU replica's host tensor is the pooled buffer itself; the array
  // keeps the value, and so the buffer, out of the pool while it lives.
  return TensorToPython(ValueOrThrow(tensor.ToHostTensor()), value);
}

py::object ReplicaValueToPython(ReplicaValue value) {
  auto shared = std::make_shared<const ReplicaValue>(std::move(value));
  const std::vector<DeviceTensor>& components = shared->components;
  if (shared->names != nullptr) {
    py::dict named;
    for (size_t i = 0; i < components.size(); ++i)
      named[py::str((*shared->names)[i])] = ComponentToPython(components[i], shared);
    return named;
  }
  if (components.size() == 1) return ComponentToPython(components[0], shared);
  py::tuple tuple(components.size());
  for (size_t i = 0; i < components.size(); ++i) tuple[i] = ComponentToPython(components[i], shared);
  return tuple;
}

class PyDistributedIterator {
 public:
  PyDistributedIterator(DistributedIterator iterator, std::vector<std::string> names)
      : names_(std::move(names)),
        iterator_(std::make_shared<DistributedIterator>(std::move(iterator))),
        reader_(std::make_unique<ReadAhead<PerReplica>>(
            [iterator = iterator_] { return iterator->GetNextAsOptional(); },
            // The SDK prefetches steps onto the devices already.
            /*capacity=*/1, /*stop_after_error=*/false)) {}

  // DistributedIterator::Save as of the last step Python took: the one read
  // ahead (if any) goes into the state.
  py::bytes Save() {
    absl::StatusOr<std::string> state = reader_->WhilePaused<absl::StatusOr<std::string>>(
        [this](const std::deque<absl::StatusOr<std::optional<PerReplica>>>& ahead) {
          int steps = 0;
          for (const auto& value : ahead) steps += value.ok() && value->has_value() ? 1 : 0;
          return iterator_->Save(steps);
        });
    return py::bytes(ValueOrThrow(std::move(state)));
  }

  py::dict Next() {
    std::optional<py::dict> step = NextAsOptional();
    if (!step.has_value()) throw py::stop_iteration();
    return *std::move(step);
  }

  std::optional<py::dict> NextAsOptional() {
    absl::StatusOr<std::optional<PerReplica>> next = reader_->Next();
    if (!next.ok()) ThrowStatus(next.status());
    if (!next->has_value()) return std::nullopt;
    py::dict step;
    for (size_t i = 0; i < (*next)->size(); ++i) step[py::str(names_[i])] = ReplicaValueToPython((**next)[i]);
    return step;
  }

 private:
  std::vector<std::string> names_;
  // Shared with the reading thread, which calls it between pauses.
  std::shared_ptr<DistributedIterator> iterator_;
  std::unique_ptr<ReadAhead<PerReplica>> reader_;
};

struct PyDistributedDataset {
  DistributedDataset dataset;
  std::vector<std::string> names;

  PyDistributedIterator Iterate() const {
    DistributedDataset copy = dataset;
    return PyDistributedIterator(ValueOrThrow(CallInterruptibly<absl::StatusOr<DistributedIterator>>(
                                     [copy] { return copy.MakeIterator(); })),
                                 names);
  }
  PyDistributedIterator Restore(const std::string& state, int64_t consumer_index,
                                int64_t num_consumers) const {
    DistributedDataset copy = dataset;
    const RestoreOptions options{.consumer_index = consumer_index, .num_consumers = num_consumers};
    return PyDistributedIterator(ValueOrThrow(CallInterruptibly<absl::StatusOr<DistributedIterator>>(
                                     [copy, state, options] { return copy.MakeIterator(state, options); })),
                                 names);
  }
};

DistributeOptions OptionsFrom(const std::string& auto_shard_policy, int prefetch_buffer_size,
                              int64_t global_batch_size) {
  DistributeOptions options;
  if (auto_shard_policy == "AUTO") {
    options.auto_shard_policy = AutoShardPolicy::kAuto;
  } else if (auto_shard_policy == "FILE") {
    options.auto_shard_policy = AutoShardPolicy::kFile;
  } else if (auto_shard_policy == "DATA") {
    options.auto_shard_policy = AutoShardPolicy::kData;
  } else if (auto_shard_policy == "OFF") {
    options.auto_shard_policy = AutoShardPolicy::kOff;
  } else {
    ThrowStatus(absl::InvalidArgumentError(
        absl::StrCat("auto_shard_policy '", auto_shard_policy, "' is not one of: AUTO, FILE, DATA, OFF")));
  }
  options.prefetch_buffer_size = prefetch_buffer_size;
  options.global_batch_size = global_batch_size;
  return options;
}

ReplicaSet ReplicasFrom(const std::vector<std::string>& names, int num_input_pipelines,
                        int input_pipeline_id) {
  return ValueOrThrow(ReplicaSet::Create(names, num_input_pipelines, input_pipeline_id));
}

constexpr char kDistributeDoc[] =
    "distribute_dataset(dataset, replicas, *, num_input_pipelines=1, input_pipeline_id=0, "
    "auto_shard_policy='AUTO', prefetch_buffer_size=2, global_batch_size=0)\n\n"
    "Splits each global batch of `dataset` across `replicas` (device names: 'CPU:0', 'GPU:0' or "
    "'cuda:0'). Iterating yields one dict per step, {name: value}, each value batch_size / "
    "num_replicas_in_sync rows; a last partial batch of n rows gives replica i rows [i*b, min((i+1)*b, n)), "
    "so later replicas may get empty batches. With several input pipelines (hosts, or DDP ranks) the data "
    "is sharded by auto_shard_policy, unless the dataset reads a named service job, whose consumers share "
    "the data already.";

}  // namespace

void BindDistribute(py::module_& module) {
  py::class_<DeviceArray>(module, "DeviceArray",
                          "One component of a replica's value in device memory. torch.from_dlpack(a), "
                          "cupy.from_dlpack(a) take it without a copy, ordered on the consumer's stream.")
      .def_property_readonly("shape", &DeviceArray::shape)
      .def_property_readonly("dtype", &DeviceArray::dtype)
      .def_property_readonly("device", &DeviceArray::device, "'GPU:0', 'CPU:1', ...")
      .def("__dlpack__", &DeviceArray::Dlpack, py::kw_only(), py::arg("stream") = py::none())
      .def("__dlpack_device__", &DeviceArray::DlpackDevice)
      .def("numpy", &DeviceArray::ToNumpy, "A host copy as a NumPy array.")
      .def("__repr__", [](const DeviceArray& self) {
        return absl::StrCat("DeviceArray(shape=", std::string(py::str(self.shape())),
                            ", dtype=", self.dtype(), ", device=", self.device(), ")");
      });

  py::class_<InputContext>(module, "InputContext",
                           "What distribute_datasets_from_function tells the function about the input "
                           "pipeline it builds.")
      .def_readonly("num_input_pipelines", &InputContext::num_input_pipelines)
      .def_readonly("input_pipeline_id", &InputContext::input_pipeline_id)
      .def_readonly("num_replicas_in_sync", &InputContext::num_replicas_in_sync)
      .def(
          "get_per_replica_batch_size",
          [](const InputContext& self, int64_t global_batch_size) {
            return ValueOrThrow(self.PerReplicaBatchSize(global_batch_size));
          },
          py::arg("global_batch_size"),
          "global_batch_size / num_replicas_in_sync; ValueError unless it divides evenly.")
      .def("__repr__", [](const InputContext& self) {
        return absl::StrCat("InputContext(num_input_pipelines=", self.num_input_pipelines,
                            ", input_pipeline_id=", self.input_pipeline_id,
                            ", num_replicas_in_sync=", self.num_replicas_in_sync, ")");
      });

  py::class_<PyDistributedIterator>(
      module, "DistributedIterator",
      "Reads a DistributedDataset's steps: one dict of per-replica values each.")
      .def("__iter__", [](PyDistributedIterator& self) -> PyDistributedIterator& { return self; })
      .def("__next__", &PyDistributedIterator::Next)
      .def("get_next", &PyDistributedIterator::Next, "The next step; StopIteration at the end of the input.")
      .def("get_next_as_optional", &PyDistributedIterator::NextAsOptional,
           "The next step, or None at the end of the input.")
      .def("save", &PyDistributedIterator::Save,
           "Where the iterator stands as of the last step taken, as bytes for "
           "DistributedDataset.iterator(restore_from=...).");

  py::class_<PyDistributedDataset>(module, "DistributedDataset",
                                   "A dataset split across replicas; iterate it for one dict per step.")
      .def("__iter__", &PyDistributedDataset::Iterate)
      .def(
          "iterator",
          [](const PyDistributedDataset& self, std::optional<py::bytes> restore_from, int64_t consumer_index,
             int64_t num_consumers) {
            if (!restore_from.has_value()) return self.Iterate();
            return self.Restore(std::string(*restore_from), consumer_index, num_consumers);
          },
          py::arg("restore_from") = py::none(), py::arg("consumer_index") = 0, py::arg("num_consumers") = 1,
          "A new iterator, or one that goes on from DistributedIterator.save() bytes (or a job checkpoint, "
          "as "
          "consumer_index of num_consumers).")
      .def_property_readonly("replicas", [](const PyDistributedDataset& self) { return self.names; })
      .def_property_readonly("num_replicas_in_sync", [](const PyDistributedDataset& self) {
        return self.dataset.replicas().num_replicas_in_sync();
      });

  module.def(
      "distribute_dataset",
      [](const Dataset& dataset, const std::vector<std::string>& replicas, int num_input_pipelines,
         int input_pipeline_id, const std::string& auto_shard_policy, int prefetch_buffer_size,
         int64_t global_batch_size) {
        DistributeOptions options = OptionsFrom(auto_shard_policy, prefetch_buffer_size, global_batch_size);
        ReplicaSet set = ReplicasFrom(replicas, num_input_pipelines, input_pipeline_id);
        absl::StatusOr<DistributedDataset> distributed =
            CallInterruptibly<absl::StatusOr<DistributedDataset>>(
                [dataset, set, options] { return DistributeDataset(dataset, set, options); });
        return PyDistributedDataset{ValueOrThrow(std::move(distributed)), replicas};
      },
      py::arg("dataset"), py::arg("replicas"), py::kw_only(), py::arg("num_input_pipelines") = 1,
      py::arg("input_pipeline_id") = 0, py::arg("auto_shard_policy") = "AUTO",
      py::arg("prefetch_buffer_size") = 2, py::arg("global_batch_size") = 0, kDistributeDoc);

  module.def(
      "distribute_datasets_from_function",
      [](py::function make_dataset, const std::vector<std::string>& replicas, int num_input_pipelines,
         int input_pipeline_id, int prefetch_buffer_size) {
        DistributeOptions options = OptionsFrom("AUTO", prefetch_buffer_size, 0);
        ReplicaSet set = ReplicasFrom(replicas, num_input_pipelines, input_pipeline_id);
        auto call = [&make_dataset](const InputContext& context) -> absl::StatusOr<Dataset> {
          py::gil_scoped_acquire gil;
          try {
            return make_dataset(context).cast<Dataset>();
          } catch (py::error_already_set& error) {
            return absl::InvalidArgumentError(absl::StrCat("the dataset function raised ", error.what()));
          } catch (const py::cast_error&) {
            return absl::InvalidArgumentError("the dataset function must return a sluice.Dataset");
          }
        };
        absl::StatusOr<DistributedDataset> distributed;
        {
          py::gil_scoped_release release;
          distributed = DistributeDatasetsFromFunction(call, set, options);
        }
        return PyDistributedDataset{ValueOrThrow(std::move(distributed)), replicas};
      },
      py::arg("dataset_fn"), py::arg("replicas"), py::kw_only(), py::arg("num_input_pipelines") = 1,
      py::arg("input_pipeline_id") = 0, py::arg("prefetch_buffer_size") = 2,
      "distribute_datasets_from_function(dataset_fn, replicas, *, num_input_pipelines=1, "
      "input_pipeline_id=0, "
      "prefetch_buffer_size=2)\n\n"
      "dataset_fn(sluice.InputContext) returns this input pipeline's Dataset, whose elements are already "
      "per-replica batches; each replica takes whole elements in turn, and when the input ends mid-step the "
      "remaining replicas get empty batches.");
}

}  // namespace sluice::python
