#include "sluice/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_buffer_cache.h"
#include "common/large_buffer_allocator.h"

namespace sluice {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    // Past int64 (a padded shape of 2^62 rows of 2^62): -1, which no
    // buffer is allocated for, rather than a wrapped count that one is.
    if (__builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string ShapeDebugString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

namespace {
std::atomic<LargeBufferAllocator*> large_buffer_allocator{nullptr};
thread_local std::shared_ptr<LargeBufferAllocator> scoped_allocator;
}  // namespace

void SetLargeBufferAllocator(LargeBufferAllocator* allocator) { large_buffer_allocator.store(allocator); }

LargeBufferAllocatorScope::LargeBufferAllocatorScope(std::shared_ptr<LargeBufferAllocator> allocator)
    : previous_(std::exchange(scoped_allocator, std::move(allocator))) {}

LargeBufferAllocatorScope::~LargeBufferAllocatorScope() { scoped_allocator = std::move(previous_); }

std::shared_ptr<LargeBufferAllocator> ScopedLargeBufferAllocator() { return scoped_allocator; }

std::shared_ptr<TensorBuffer> TensorBuffer::Allocate(DType dtype, int64_t num_elements, bool zeroed) {
  if (num_elements < 0 ||
      static_cast<uint64_t>(num_elements) > std::numeric_limits<size_t>::max() / 2 / DTypeSize(dtype)) {
    // Caught where pipeline code runs (common/exceptions.h) and made
    // ResourceExhausted, as a failed allocation is.
    throw std::length_error(
        num_elements < 0 ? std::string("a tensor whose element count overflows int64")
                         : absl::StrCat("a tensor of ", num_elements, " elements of ", DTypeName(dtype)));
  }
  const size_t bytes = static_cast<size_t>(num_elements) * DTypeSize(dtype);
  LargeBufferAllocator* allocator = scoped_allocator.get();
  if (allocator == nullptr) allocator = large_buffer_allocator.load();
  if (allocator == nullptr) allocator = &HostBufferCache::Global();
  if (dtype != DType::kString && bytes >= allocator->min_bytes()) {
    if (void* data = allocator->Allocate(bytes); data != nullptr) {
      if (zeroed) std::memset(data, 0, bytes);
      // A scoped allocator (a task's) may end before its buffers do.
      std::shared_ptr<LargeBufferAllocator> keep =
          allocator == scoped_allocator.get() ? scoped_allocator : nullptr;
      return Wrap(dtype, num_elements, data,
                  [allocator, data, bytes, keep = std::move(keep)] { allocator->Free(data, bytes); });
    }
  }
  // aligned_alloc needs a size that is a multiple of the alignment.
  const size_t rounded = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  void* data = std::aligned_alloc(kBufferAlignment, rounded == 0 ? kBufferAlignment : rounded);
  if (data == nullptr) throw std::bad_alloc();
  if (dtype == DType::kString) {
    auto* strings = static_cast<std::string*>(data);
    for (int64_t i = 0; i < num_elements; ++i) new (strings + i) std::string();
  } else if (zeroed) {
    std::memset(data, 0, bytes);
  }
  return std::make_shared<TensorBuffer>(PassKey{}, dtype, num_elements, data);
}

std::shared_ptr<TensorBuffer> TensorBuffer::Wrap(DType dtype, int64_t num_elements, void* data,
                                                 std::function<void()> release) {
  auto buffer = std::make_shared<TensorBuffer>(PassKey{}, dtype, num_elements, data);
  buffer->release_ = std::move(release);
  return buffer;
}

TensorBuffer::~TensorBuffer() {
  if (release_) {
    release_();
    return;
  }
  if (dtype_ == DType::kString) {
    auto* strings = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) strings[i].~basic_string();
  }
  std::free(data_);
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      num_elements_(NumElements(shape_)),
      buffer_(TensorBuffer::Allocate(dtype, num_elements_)) {}

Tensor Tensor::Uninitialized(DType dtype, Shape shape) {
  const int64_t n = NumElements(shape);
  return Tensor(dtype, std::move(shape), TensorBuffer::Allocate(dtype, n, /*zeroed=*/false), 0);
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<TensorBuffer> buffer, int64_t offset)
    : dtype_(dtype),
      shape_(std::move(shape)),
      num_elements_(NumElements(shape_)),
      buffer_(std::move(buffer)),
      offset_(offset) {}

size_t Tensor::ByteSize() const {
  if (dtype_ != DType::kString) return static_cast<size_t>(num_elements_) * DTypeSize(dtype_);
  size_t total = 0;
  for (const std::string& s : values<std::string>()) total += s.size();
  return total;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  Shape shape = shape_;
  shape[0] = end - begin;
  const int64_t row = shape_[0] == 0 ? 0 : num_elements_ / shape_[0];
  return Tensor(dtype_, std::move(shape), buffer_, offset_ + begin * row);
}

Tensor Tensor::SubTensor(int64_t index) const {
  Shape shape(shape_.begin() + 1, shape_.end());
  const int64_t row = NumElements(shape);
  return Tensor(dtype_, std::move(shape), buffer_, offset_ + index * row);
}

absl::StatusOr<Tensor> Tensor::Reshaped(Shape shape) const {
  if (NumElements(shape) != num_elements_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", ShapeDebugString(shape_), " to ", ShapeDebugString(shape)));
  }
  return Tensor(dtype_, std::move(shape), buffer_, offset_);
}

Tensor Tensor::DeepCopy() const {
  Tensor copy(dtype_, shape_);
  if (dtype_ == DType::kString) {
    std::string* out = copy.mutable_data<std::string>();
    const std::string* in = data<std::string>();
    for (int64_t i = 0; i < num_elements_; ++i) out[i] = in[i];
  } else if (num_elements_ > 0) {
    std::memcpy(copy.mutable_raw_data(), raw_data(), ByteSize());
  }
  return copy;
}

bool Tensor::operator==(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  if (!valid()) return true;
  if (dtype_ == DType::kString) {
    for (int64_t i = 0; i < num_elements_; ++i) {
      if (data<std::string>()[i] != other.data<std::string>()[i]) return false;
    }
    return true;
  }
  return num_elements_ == 0 || std::memcmp(raw_data(), other.raw_data(), ByteSize()) == 0;
}

std::string Tensor::DebugString() const {
  std::ostringstream out;
  out << DTypeName(dtype_) << ShapeDebugString(shape_) << "{";
  const int64_t shown = std::min<int64_t>(num_elements_, 16);
  for (int64_t i = 0; i < shown; ++i) {
    if (i > 0) out << ", ";
    if (dtype_ == DType::kString) {
      out << '"' << data<std::string>()[i] << '"';
    } else if (IsFloatingDType(dtype_)) {
      out << NumericValueAsDouble(*this, i);
    } else {
      out << NumericValueAsInt64(*this, i);
    }
  }
  if (shown < num_elements_) out << ", ...";
  out << "}";
  return out.str();
}

namespace {

template <typename T>
double ToDouble(T value) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(value));
  } else {
    return static_cast<double>(value);
  }
}

template <typename T>
int64_t ToInt64(T value) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<int64_t>(static_cast<float>(value));
  } else {
    return static_cast<int64_t>(value);
  }
}

template <typename To, typename From>
To ConvertValue(From value) {
  if constexpr (std::is_same_v<To, Float16> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(ToDouble(value)));
  } else if constexpr (std::is_same_v<From, Float16> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

}  // namespace

double NumericValueAsDouble(const Tensor& t, int64_t index) {
  double result = 0;
  VisitNumericDType(t.dtype(), [&]<typename T>() { result = ToDouble(t.data<T>()[index]); });
  return result;
}

int64_t NumericValueAsInt64(const Tensor& t, int64_t index) {
  int64_t result = 0;
  VisitNumericDType(t.dtype(), [&]<typename T>() { result = ToInt64(t.data<T>()[index]); });
  return result;
}

absl::StatusOr<Tensor> CastTensor(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  if (!IsNumericDType(t.dtype()) || !IsNumericDType(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot cast ", DTypeName(t.dtype()), " to ", DTypeName(dtype)));
  }
  Tensor out(dtype, t.shape());
  VisitNumericDType(t.dtype(), [&]<typename From>() {
    VisitNumericDType(dtype, [&]<typename To>() {
      const From* in = t.data<From>();
      To* dst = out.mutable_data<To>();
      for (int64_t i = 0; i < t.num_elements(); ++i) dst[i] = ConvertValue<To>(in[i]);
    });
  });
  return out;
}

}  // namespace sluice
