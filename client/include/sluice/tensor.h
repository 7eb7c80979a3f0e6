// Tensor: a dtype, a shape and a view into one reference-counted buffer.
//
// The buffer is a single contiguous allocation aligned to kBufferAlignment
// (small tensors decoded from one network response share one, each 16-byte
// aligned: service/element_wire.cc), shared by every tensor sliced from it: Slice() and SubTensor() along the
// first dimension never copy, which is what keeps unbatch and per-replica
// batch splitting cheap. Tensors are values with shared-buffer semantics,
// like shared_ptr: copying a Tensor shares the bytes.
//
//   Tensor batch = Tensor::FromVector<int64_t>({0, 1, 2, 3}, {2, 2});
//   Tensor row = batch.SubTensor(1);  // shape [2], values {2, 3}, no copy
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_TENSOR_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_TENSOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sluice/dtype.h"

namespace sluice {

inline constexpr size_t kBufferAlignment = 64;

using Shape = std::vector<int64_t>;

// The number of elements of a shape (1 for a scalar).
int64_t NumElements(const Shape& shape);
std::string ShapeDebugString(const Shape& shape);

// One aligned allocation of `num_elements` values of a dtype. Numeric
// buffers start zeroed; string buffers hold empty strings.
class TensorBuffer {
 public:
  // `zeroed` false leaves numeric bytes unset, for producers that write
  // every element anyway.
  static std::shared_ptr<TensorBuffer> Allocate(DType dtype, int64_t num_elements, bool zeroed = true);
  // Numeric elements in memory someone else owns (a pooled buffer);
  // `release` runs instead of freeing when the last user drops the buffer.
  static std::shared_ptr<TensorBuffer> Wrap(DType dtype, int64_t num_elements, void* data,
                                            std::function<void()> release);
  // Use Allocate; public only for std::make_shared, which saves an
  // allocation per tensor.
  struct PassKey {};
  TensorBuffer(PassKey, DType dtype, int64_t num_elements, void* data)
      : dtype_(dtype), num_elements_(num_elements), data_(data) {}
  ~TensorBuffer();
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  int64_t num_elements() const { return num_elements_; }

 private:
  const DType dtype_;
  const int64_t num_elements_;
  void* const data_;
  std::function<void()> release_;  // set for wrapped memory
};

class Tensor {
 public:
  // An invalid tensor (dtype kInvalid); only good for assignment.
  Tensor() = default;
  // A new zeroed tensor (empty strings for kString).
  Tensor(DType dtype, Shape shape);
  // A new tensor whose numeric elements are unset: the caller writes them all.
  static Tensor Uninitialized(DType dtype, Shape shape);

  template <typename T>
  static Tensor Scalar(T value) {
    Tensor t(DTypeOf<T>(), {});
    *t.mutable_data<T>() = std::move(value);
    return t;
  }
  static Tensor StringScalar(std::string value) { return Scalar<std::string>(std::move(value)); }

  // Values in row-major order; `shape` defaults to a vector of values.size().
  template <typename T>
  static absl::StatusOr<Tensor> FromVector(std::vector<T> values, Shape shape);
  template <typename T>
  static Tensor FromVector(std::vector<T> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    return *FromVector<T>(std::move(values), Shape{n});
  }

  bool valid() const { return dtype_ != DType::kInvalid; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t num_elements() const { return num_elements_; }
  // Bytes of element storage (for strings: the sum of their lengths).
  size_t ByteSize() const;

  template <typename T>
  const T* data() const {
    return static_cast<const T*>(buffer_->data()) + offset_;
  }
  template <typename T>
  T* mutable_data() {
    return static_cast<T*>(buffer_->data()) + offset_;
  }
  template <typename T>
  absl::Span<const T> values() const {
    return absl::Span<const T>(data<T>(), static_cast<size_t>(num_elements_));
  }
  const void* raw_data() const {
    return static_cast<const char*>(buffer_->data()) + offset_ * DTypeSize(dtype_);
  }
  void* mutable_raw_data() { return static_cast<char*>(buffer_->data()) + offset_ * DTypeSize(dtype_); }

  // Rows [begin, end) along the first dimension, sharing this buffer.
  // Requires rank >= 1 and 0 <= begin <= end <= dim(0).
  Tensor Slice(int64_t begin, int64_t end) const;
  // Row `index` along the first dimension with that dimension dropped,
  // sharing this buffer.
  Tensor SubTensor(int64_t index) const;
  // The same elements under another shape with as many elements.
  absl::StatusOr<Tensor> Reshaped(Shape shape) const;
  // A copy into a fresh buffer.
  Tensor DeepCopy() const;
  // A tensor over `buffer`'s elements from `offset` on.
  static Tensor FromBuffer(DType dtype, Shape shape, std::shared_ptr<TensorBuffer> buffer,
                           int64_t offset = 0) {
    return Tensor(dtype, std::move(shape), std::move(buffer), offset);
  }

  bool SharesBufferWith(const Tensor& other) const { return buffer_ && buffer_ == other.buffer_; }
  const std::shared_ptr<TensorBuffer>& buffer() const { return buffer_; }

  // Element-wise equality of dtype, shape and values (bitwise for floats).
  bool operator==(const Tensor& other) const;

  // A short human-readable form, for test failures and logs.
  std::string DebugString() const;

 private:
  Tensor(DType dtype, Shape shape, std::shared_ptr<TensorBuffer> buffer, int64_t offset);

  DType dtype_ = DType::kInvalid;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<TensorBuffer> buffer_;
  int64_t offset_ = 0;  // in elements, from the buffer start
};

template <typename T>
absl::StatusOr<Tensor> Tensor::FromVector(std::vector<T> values, Shape shape) {
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError("shape " + ShapeDebugString(shape) + " needs " +
                                      std::to_string(NumElements(shape)) + " values, got " +
                                      std::to_string(values.size()));
  }
  Tensor t(DTypeOf<T>(), std::move(shape));
  T* out = t.mutable_data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = std::move(values[i]);
  return t;
}

// Reads element `index` of a numeric tensor as double / int64 (with C++
// conversion rules); used by element functions and JSON output.
double NumericValueAsDouble(const Tensor& t, int64_t index);
int64_t NumericValueAsInt64(const Tensor& t, int64_t index);

// A new tensor of `dtype` with the elements of a numeric tensor converted
// (C++ conversion rules; float->int truncates, like tf.cast).
absl::StatusOr<Tensor> CastTensor(const Tensor& t, DType dtype);

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_TENSOR_H_
