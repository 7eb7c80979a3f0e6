#include "service/int_ranges.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace sluice {

absl::Status CheckPairs(const google::protobuf::RepeatedField<int64_t>& pairs, int64_t lowest,
                        const std::string& field) {
  if (pairs.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must hold [begin, end) pairs, not ", pairs.size(), " numbers"));
  }
  int64_t last_end = lowest;
  for (int i = 0; i < pairs.size(); i += 2) {
    if (pairs[i] < last_end || pairs[i + 1] <= pairs[i]) {
      return absl::InvalidArgumentError(absl::StrCat(field, " has [", pairs[i], ", ", pairs[i + 1],
                                                     "): empty, below ", lowest,
                                                     ", or not after the range before"));
    }
    last_end = pairs[i + 1];
  }
  return absl::OkStatus();
}

absl::StatusOr<IntRanges> RangesFromPairs(const google::protobuf::RepeatedField<int64_t>& pairs,
                                          int64_t lowest, const std::string& field) {
  if (absl::Status s = CheckPairs(pairs, lowest, field); !s.ok()) return s;
  IntRanges ranges;
  for (int i = 0; i < pairs.size(); i += 2) ranges.emplace_hint(ranges.end(), pairs[i], pairs[i + 1]);
  return ranges;
}

void AppendPairs(const IntRanges& ranges, google::protobuf::RepeatedField<int64_t>* pairs) {
  for (const auto& [begin, end] : ranges) {
    pairs->Add(begin);
    pairs->Add(end);
  }
}

void InsertRange(IntRanges* ranges, int64_t begin, int64_t end) {
  auto next = ranges->upper_bound(begin);
  if (next != ranges->begin()) {
    auto before = std::prev(next);
    if (before->second >= begin) {
      begin = before->first;
      end = std::max(end, before->second);
      next = ranges->erase(before);
    }
  }
  while (next != ranges->end() && next->first <= end) {
    end = std::max(end, next->second);
    next = ranges->erase(next);
  }
  (*ranges)[begin] = end;
}

bool InRanges(const IntRanges& ranges, int64_t value) {
  auto next = ranges.upper_bound(value);
  return next != ranges.begin() && value < std::prev(next)->second;
}

bool CoversRange(const IntRanges& ranges, int64_t begin, int64_t end) {
  while (begin < end) {
    auto next = ranges.upper_bound(begin);
    if (next == ranges.begin() || std::prev(next)->second <= begin) return false;
    begin = std::prev(next)->second;
  }
  return true;
}

bool OverlapsRange(const IntRanges& ranges, int64_t begin, int64_t end) {
  auto next = ranges.upper_bound(begin);
  if (next != ranges.begin() && std::prev(next)->second > begin) return true;
  return next != ranges.end() && next->first < end;
}

}  // namespace sluice
