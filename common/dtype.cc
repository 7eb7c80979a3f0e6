#include "sluice/dtype.h"

#include <array>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace sluice {
namespace {

constexpr std::array<std::pair<DType, std::string_view>, 14> kNames = {{
    {DType::kBool, "bool"},
    {DType::kInt8, "int8"},
    {DType::kInt16, "int16"},
    {DType::kInt32, "int32"},
    {DType::kInt64, "int64"},
    {DType::kUInt8, "uint8"},
    {DType::kUInt16, "uint16"},
    {DType::kUInt32, "uint32"},
    {DType::kUInt64, "uint64"},
    {DType::kFloat16, "float16"},
    {DType::kBFloat16, "bfloat16"},
    {DType::kFloat32, "float32"},
    {DType::kFloat64, "float64"},
    {DType::kString, "string"},
}};

}  // namespace

const std::string& DTypeName(DType dtype) {
  // Strings rather than views, for absl::StrCat and stable references.
  static const auto* names = [] {
    auto* result = new std::vector<std::string>(kNames.size() + 1, "invalid");
    for (const auto& [value, name] : kNames) (*result)[static_cast<int>(value)] = std::string(name);
    return result;
  }();
  const int index = static_cast<int>(dtype);
  return (*names)[index >= 0 && index < static_cast<int>(names->size()) ? index : 0];
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (const auto& [value, known] : kNames) {
    if (known == name) return value;
  }
  if (name == "float") return DType::kFloat32;
  if (name == "double") return DType::kFloat64;
  if (name == "half") return DType::kFloat16;
  std::vector<std::string> candidates;
  for (const auto& entry : kNames) candidates.emplace_back(entry.second);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", std::string(name), "'", DidYouMean(name, candidates)));
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
      return 8;
    case DType::kString:
      return sizeof(std::string);
    case DType::kInvalid:
      return 0;
  }
  return 0;
}

bool IsIntegerDType(DType dtype) {
  switch (dtype) {
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

bool IsFloatingDType(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

}  // namespace sluice
