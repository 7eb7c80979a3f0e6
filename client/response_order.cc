#include "client/response_order.h"

#include <algorithm>
#include <utility>

namespace sluice {

int64_t ResponseOrder::Send() {
  const int64_t stamp = ++sent_;
  in_flight_.insert(stamp);
  return stamp;
}

void ResponseOrder::Returned(int64_t stamp) { in_flight_.erase(stamp); }

void ResponseOrder::Hold(ElementsResponse response) {
  Held& held = held_[response.first_index];
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

}  // namespace sluice
