#include "client/read/response_order.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::reader {

int64_t ResponseOrder::Send() {
  const int64_t stamp = ++sent_;
  in_flight_.insert(stamp);
  return stamp;
}

void ResponseOrder::Returned(int64_t stamp) { in_flight_.erase(stamp); }

absl::Status ResponseOrder::Hold(ElementsResponse response) {
  const int64_t first = response.first_index;
  const auto count = static_cast<int64_t>(response.elements.size());
  if (first < 0 || first > std::numeric_limits<int64_t>::max() - count) {
    return absl::DataLossError(absl::StrCat("a response's first_index ", first, " is out of range"));
  }
  const int64_t end = first + count;
  // Empty responses overlap nothing: one that reports splits complete may
  // share its index with elements (see above).
  if (end > first) {
    auto repeated = [&](const std::string& what) {
      return absl::DataLossError(absl::StrCat("a response of the task's elements [", first, ", ", end, ") ",
                                              what, ": a worker hands out each index once"));
    };
    // A response that could still come before one given out is held back
    // (PopReady), so nothing genuine starts before where those end.
    if (first < next_index_) {
      return repeated(absl::StrCat("came after elements up to index ", next_index_, " were received"));
    }
    for (const auto& [held_first, held] : held_) {
      const int64_t held_end = held_first + static_cast<int64_t>(held.elements.size());
      if (held_end > held_first && first < held_end && held_first < end) {
        return repeated(
            absl::StrCat("overlaps [", held_first, ", ", held_end, "), held from an earlier response"));
      }
    }
  }
  Held& held = held_[first];
  held.sent_before_arrival = std::max(held.sent_before_arrival, sent_);
  if (held.elements.empty()) {
    held.elements = std::move(response.elements);
  } else {
    for (Element& e : response.elements) held.elements.push_back(std::move(e));
  }
  auto append = [](std::vector<int64_t>& to, const std::vector<int64_t>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  append(held.tags.split_seqs, response.tags.split_seqs);
  append(held.tags.split_positions, response.tags.split_positions);
  append(held.tags.completed_splits, response.tags.completed_splits);
  append(held.tags.completed_split_sizes, response.tags.completed_split_sizes);
  return absl::OkStatus();
}

std::optional<ResponseOrder::Ready> ResponseOrder::PopReady() {
  if (held_.empty()) return std::nullopt;
  auto first = held_.begin();
  const bool next_in_line = first->first == next_index_;
  if (!next_in_line && !in_flight_.empty() && *in_flight_.begin() <= first->second.sent_before_arrival) {
    return std::nullopt;
  }
  Ready ready{first->first, std::move(first->second.elements), std::move(first->second.tags)};
  held_.erase(first);
  next_index_ = std::max(next_index_, ready.first_index + static_cast<int64_t>(ready.elements.size()));
  return ready;
}

}  // namespace sluice::reader
