#include "common/json.h"

#include <charconv>
#include <cmath>

#include "absl/strings/escaping.h"
#include "common/strings.h"

namespace sluice {
namespace {

template <typename T>
void AppendNumber(T value, std::string* out) {
  if constexpr (std::is_same_v<T, bool>) {
    out->append(value ? "true" : "false");
  } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    AppendNumber(static_cast<float>(value), out);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(value)) {
      out->append("NaN");
    } else if (std::isinf(value)) {
      out->append(value > 0 ? "Infinity" : "-Infinity");
    } else {
      char buffer[64];
      // Shortest form that reads back to the same value of type T.
      auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
      out->append(buffer, result.ptr);
    }
  } else {
    char buffer[32];
    auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    out->append(buffer, result.ptr);
  }
}

void AppendValue(const Tensor& tensor, int64_t index, std::string* out) {
  if (tensor.dtype() == DType::kString) {
    AppendJsonString(tensor.data<std::string>()[index], out);
    return;
  }
  VisitNumericDType(tensor.dtype(), [&]<typename T>() { AppendNumber(tensor.data<T>()[index], out); });
}

// Writes dimensions [dim, rank) starting at flat element `*index`.
void AppendNested(const Tensor& tensor, int dim, int64_t* index, std::string* out) {
  if (dim == tensor.rank()) {
    AppendValue(tensor, (*index)++, out);
    return;
  }
  out->push_back('[');
  for (int64_t i = 0; i < tensor.dim(dim); ++i) {
    if (i > 0) out->append(", ");
    AppendNested(tensor, dim + 1, index, out);
  }
  out->push_back(']');
}

}  // namespace

void AppendJsonString(std::string_view bytes, std::string* out) {
  out->push_back('"');
  if (!IsValidUtf8(bytes)) {
    out->append("b64:");
    out->append(absl::Base64Escape(absl::string_view(bytes.data(), bytes.size())));
    out->push_back('"');
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : bytes) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[(c >> 4) & 0xf]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void AppendTensorJson(const Tensor& tensor, std::string* out) {
  int64_t index = 0;
  AppendNested(tensor, 0, &index, out);
}

std::string ElementToJson(const Element& element) {
  std::string out;
  if (element.size() == 1 && !element.named()) {
    AppendTensorJson(element.components[0], &out);
    return out;
  }
  out.push_back(element.named() ? '{' : '[');
  for (size_t i = 0; i < element.size(); ++i) {
    if (i > 0) out.append(", ");
    if (element.named()) {
      AppendJsonString((*element.names)[i], &out);
      out.append(": ");
    }
    AppendTensorJson(element.components[i], &out);
  }
  out.push_back(element.named() ? '}' : ']');
  return out;
}

}  // namespace sluice
