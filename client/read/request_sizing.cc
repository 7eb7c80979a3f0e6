#include "client/read/request_sizing.h"

#include <algorithm>

namespace sluice::reader {
namespace {

// The running sums are halved when this many elements were counted.
constexpr int64_t kHalveAfterElements = 1024;

}  // namespace

RequestSizing::RequestSizing(int64_t max_outstanding) { SetBudget(max_outstanding); }

void RequestSizing::SetBudget(int64_t max_outstanding) {
  request_share_ = std::max<int64_t>(1, max_outstanding / 2);
  min_request_ = std::max<int64_t>(1, request_share_ / 2);
}

int64_t RequestSizing::AverageBytes() const {
  return elements_received_ == 0 ? 0 : std::max<int64_t>(1, bytes_received_ / elements_received_);
}

int64_t RequestSizing::ElementsToAsk(int64_t room) const {
  return std::min<int64_t>({kMaxElementsPerRequest, request_share_, ElementsForTargetBytes(), room});
}

void RequestSizing::Observe(int64_t bytes) {
  bytes_received_ += bytes;
  if (++elements_received_ == kHalveAfterElements) {
    elements_received_ /= 2;
    bytes_received_ /= 2;
  }
}

int64_t RequestSizing::ElementsForTargetBytes() const {
  if (elements_received_ == 0) return 1;
  const int64_t average = std::max<int64_t>(1, bytes_received_ / elements_received_);
  return std::max<int64_t>(1, kTargetResponseBytes / average);
}

}  // namespace sluice::reader
