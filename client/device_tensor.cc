// DeviceTensor: its accessors, the host copy and the DLPack view.
#include <dlpack/dlpack.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/device/device_backend.h"
#include "client/device/device_tensor_state.h"
#include "sluice/distribute.h"

namespace sluice {
namespace {

const internal::DeviceTensorState& State(const DeviceTensor& tensor) {
  return internal::DeviceTensorAccess::State(tensor);
}

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

DType DeviceTensor::dtype() const { return State(*this).dtype; }
const Shape& DeviceTensor::shape() const { return State(*this).shape; }
size_t DeviceTensor::byte_size() const { return State(*this).byte_size; }
const Device& DeviceTensor::device() const { return State(*this).device; }
const void* DeviceTensor::data() const { return State(*this).data; }

absl::StatusOr<Tensor> DeviceTensor::ToHostTensor() const {
  const internal::DeviceTensorState& s = State(*this);
  if (s.host.valid()) return s.host;
  Tensor host = Tensor::Uninitialized(s.dtype, s.shape);
  if (s.byte_size == 0) return host;
  if (absl::Status status = s.backend->CopyToHost(host.mutable_raw_data(), s.data, s.byte_size);
      !status.ok()) {
    return status;
  }
  return host;
}

absl::StatusOr<DLManagedTensor*> DeviceTensor::ToDLPack() const {
  const internal::DeviceTensorState& s = State(*this);
  absl::StatusOr<DLDataType> type = DlpackType(s.dtype);
  if (!type.ok()) return type.status();
  auto owner = std::make_unique<DlpackOwner>(DlpackOwner{s.shape, s.lease, s.host});
  auto managed = std::make_unique<DLManagedTensor>();
  DLTensor& view = managed->dl_tensor;
  view.data = s.data != nullptr ? s.data : (s.host.valid() ? const_cast<void*>(s.host.raw_data()) : nullptr);
  view.device = DLDevice{s.device.kind == DeviceKind::kGpu ? kDLCUDA : kDLCPU,
                         s.device.kind == DeviceKind::kGpu ? s.device.index : 0};
  view.ndim = static_cast<int32_t>(s.shape.size());
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

}  // namespace sluice
