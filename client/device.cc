#include "sluice/device.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice {

std::string Device::name() const { return absl::StrCat(kind == DeviceKind::kCpu ? "CPU:" : "GPU:", index); }

absl::StatusOr<Device> Device::Parse(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  std::string rest = lower;
  // "/job:localhost/replica:0/task:0/device:GPU:1" and "/device:GPU:1".
  if (size_t at = lower.rfind("device:"); at != std::string::npos) {
    rest = lower.substr(at + 7);
  } else if (!rest.empty() && rest[0] == '/') {
    rest = rest.substr(1);
  }
  const size_t colon = rest.find(':');
  const std::string kind = rest.substr(0, colon);
  const std::string digits = colon == std::string::npos ? "" : rest.substr(colon + 1);
  int index = -1;
  // "cuda:N" is PyTorch's name for GPU:N.
  if ((kind != "cpu" && kind != "gpu" && kind != "cuda") || digits.empty() ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(digits, &index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", std::string(name), "' is not CPU:N, GPU:N or cuda:N"));
  }
  return Device{kind == "cpu" ? DeviceKind::kCpu : DeviceKind::kGpu, index};
}

}  // namespace sluice
