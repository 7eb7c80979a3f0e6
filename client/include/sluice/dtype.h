// Element types of tensors, their storage types and names.
//
// Every dtype maps to one C++ storage type (float16 and bfloat16 are stored
// as 16-bit patterns, see half.h). Generic code switches on a dtype with
// VisitNumericDType:
//
//   VisitNumericDType(t.dtype(), [&]<typename T>() { Sum(t.data<T>()); });
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_DTYPE_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "sluice/half.h"

namespace sluice {

// Values equal those of proto::DataType, so conversions are casts.
enum class DType : int {
  kInvalid = 0,
  kBool = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kUInt8 = 6,
  kUInt16 = 7,
  kUInt32 = 8,
  kUInt64 = 9,
  kFloat16 = 10,
  kBFloat16 = 11,
  kFloat32 = 12,
  kFloat64 = 13,
  kString = 14,
};

// The name used in YAML and messages: "int64", "float32", "string", ...
const std::string& DTypeName(DType dtype);

// Parses a dtype name; accepts tf's aliases "float", "double", "half".
// An unknown name is InvalidArgument naming the closest valid one.
absl::StatusOr<DType> ParseDType(std::string_view name);

// Bytes per element in a tensor buffer (sizeof(std::string) for strings).
size_t DTypeSize(DType dtype);

bool IsIntegerDType(DType dtype);   // signed or unsigned integers
bool IsFloatingDType(DType dtype);  // float16, bfloat16, float32, float64
inline bool IsNumericDType(DType dtype) {
  return dtype == DType::kBool || IsIntegerDType(dtype) || IsFloatingDType(dtype);
}

// Calls visitor.template operator()<T>() with T the storage type of a
// non-string dtype. Returns false (without calling) for string or invalid.
template <typename Visitor>
bool VisitNumericDType(DType dtype, Visitor&& visitor) {
  switch (dtype) {
    case DType::kBool:
      visitor.template operator()<bool>();
      return true;
    case DType::kInt8:
      visitor.template operator()<int8_t>();
      return true;
    case DType::kInt16:
      visitor.template operator()<int16_t>();
      return true;
    case DType::kInt32:
      visitor.template operator()<int32_t>();
      return true;
    case DType::kInt64:
      visitor.template operator()<int64_t>();
      return true;
    case DType::kUInt8:
      visitor.template operator()<uint8_t>();
      return true;
    case DType::kUInt16:
      visitor.template operator()<uint16_t>();
      return true;
    case DType::kUInt32:
      visitor.template operator()<uint32_t>();
      return true;
    case DType::kUInt64:
      visitor.template operator()<uint64_t>();
      return true;
    case DType::kFloat16:
      visitor.template operator()<Float16>();
      return true;
    case DType::kBFloat16:
      visitor.template operator()<BFloat16>();
      return true;
    case DType::kFloat32:
      visitor.template operator()<float>();
      return true;
    case DType::kFloat64:
      visitor.template operator()<double>();
      return true;
    default:
      return false;
  }
}

// The dtype whose storage type is T.
template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<bool>() {
  return DType::kBool;
}
template <>
constexpr DType DTypeOf<int8_t>() {
  return DType::kInt8;
}
template <>
constexpr DType DTypeOf<int16_t>() {
  return DType::kInt16;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType DTypeOf<uint8_t>() {
  return DType::kUInt8;
}
template <>
constexpr DType DTypeOf<uint16_t>() {
  return DType::kUInt16;
}
template <>
constexpr DType DTypeOf<uint32_t>() {
  return DType::kUInt32;
}
template <>
constexpr DType DTypeOf<uint64_t>() {
  return DType::kUInt64;
}
template <>
constexpr DType DTypeOf<Float16>() {
  return DType::kFloat16;
}
template <>
constexpr DType DTypeOf<BFloat16>() {
  return DType::kBFloat16;
}
template <>
constexpr DType DTypeOf<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType DTypeOf<std::string>() {
  return DType::kString;
}

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_DTYPE_H_
