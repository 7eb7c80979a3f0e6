#include "cli/summary.h"

#include <algorithm>
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

// The first kMaxShown values, as text inside a JSON string.
std::string FirstValues(const Tensor& tensor) {
  std::vector<std::string> shown;
  const int64_t count = std::min<int64_t>(kMaxShown, tensor.num_elements());
  if (tensor.dtype() == DType::kString) {
    for (int64_t i = 0; i < count; ++i) {
      const std::string& value = tensor.data<std::string>()[i];
      shown.push_back(value.size() > kMaxStringBytes ? value.substr(0, kMaxStringBytes) + "..." : value);
    }
  } else {
    const Tensor first = tensor.Reshaped(Shape({tensor.num_elements()}))->Slice(0, count);
    std::string json = Json(first);  // "[1, 2, 3]"
    shown.push_back(json.substr(1, json.size() - 2));
  }
  std::string out;
  AppendJsonString(absl::StrJoin(shown, ", "), &out);
  return out.substr(1, out.size() - 2);  // escaped, without its quotes
}

std::string ComponentSummary(const Tensor& tensor) {
  if (tensor.dtype() == DType::kString && tensor.num_elements() == 1 &&
      tensor.data<std::string>()[0].size() > kMaxStringBytes) {
    return absl::StrCat("\"<", tensor.data<std::string>()[0].size(), " bytes>\"");
  }
  if (tensor.num_elements() <= kMaxListed) return Json(tensor);
  std::string line = absl::StrCat("\"", DTypeName(tensor.dtype()), ShapeDebugString(tensor.shape()), " ",
                                  FirstValues(tensor), ", ...");
  if (tensor.dtype() != DType::kString)
    absl::StrAppend(&line, " mean ", absl::StrFormat("%.4g", Mean(tensor)));
  return line + "\"";
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
