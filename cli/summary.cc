#include "cli/summary.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json.h"

namespace sluice::cli {
namespace {

// Up to this many bytes, a string prints as itself.
constexpr size_t kMaxStringBytes = 32;

double ValueAt(const Tensor& tensor, int64_t i) {
  switch (tensor.dtype()) {
    case DType::kBool:
      return tensor.data<bool>()[i];
    case DType::kInt8:
      return tensor.data<int8_t>()[i];
    case DType::kInt16:
      return tensor.data<int16_t>()[i];
    case DType::kInt32:
      return tensor.data<int32_t>()[i];
    case DType::kInt64:
      return static_cast<double>(tensor.data<int64_t>()[i]);
    case DType::kUInt8:
      return tensor.data<uint8_t>()[i];
    case DType::kUInt16:
      return tensor.data<uint16_t>()[i];
    case DType::kUInt32:
      return tensor.data<uint32_t>()[i];
    case DType::kUInt64:
      return static_cast<double>(tensor.data<uint64_t>()[i]);
    case DType::kFloat16:
      return static_cast<float>(tensor.data<Float16>()[i]);
    case DType::kBFloat16:
      return static_cast<float>(tensor.data<BFloat16>()[i]);
    case DType::kFloat32:
      return tensor.data<float>()[i];
    case DType::kFloat64:
      return tensor.data<double>()[i];
    default:
      return 0;
  }
}

std::string Json(const Tensor& tensor) {
  std::string out;
  AppendTensorJson(tensor, &out);
  return out;
}

std::string ComponentSummary(const Tensor& tensor) {
  const std::string described = absl::StrCat(DTypeName(tensor.dtype()), ShapeDebugString(tensor.shape()));
  if (tensor.dtype() == DType::kString) {
    if (tensor.num_elements() > kMaxListed) return absl::StrCat("\"", described, "\"");
    if (tensor.num_elements() == 1 && tensor.data<std::string>()[0].size() > kMaxStringBytes) {
      return absl::StrCat("\"<", tensor.data<std::string>()[0].size(), " bytes>\"");
    }
    return Json(tensor);
  }
  if (tensor.num_elements() <= kMaxListed) return Json(tensor);
  double sum = 0;
  for (int64_t i = 0; i < tensor.num_elements(); ++i) sum += ValueAt(tensor, i);
  return absl::StrCat("\"", described, " mean ", absl::StrFormat("%.4g", sum / tensor.num_elements()), "\"");
}

}  // namespace

std::string ElementSummary(const Element& element) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < element.size(); ++i) {
    std::string part = ComponentSummary(element.components[i]);
    if (element.named()) part = absl::StrCat("\"", (*element.names)[i], "\": ", part);
    parts.push_back(std::move(part));
  }
  return element.named() ? absl::StrCat("{", absl::StrJoin(parts, ", "), "}")
                         : absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

}  // namespace sluice::cli
