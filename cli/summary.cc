#include "cli/summary.h"

#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json.h"

namespace sluice::cli {
namespace {

// Up to this many bytes, a string prints as itself.
constexpr size_t kMaxStringBytes = 32;

double Mean(const Tensor& tensor) {
  double sum = 0;
  VisitNumericDType(tensor.dtype(), [&]<typename T>() {
    for (const T& value : tensor.values<T>()) {
      if constexpr (std::is_arithmetic_v<T>) {
        sum += static_cast<double>(value);
      } else {  // float16, bfloat16
        sum += static_cast<float>(value);
      }
    }
  });
  return sum / static_cast<double>(tensor.num_elements());
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
  return absl::StrCat("\"", described, " mean ", absl::StrFormat("%.4g", Mean(tensor)), "\"");
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
