// Ranges of integers, [begin, end) by begin and apart, as a map: the split
// seqs a restored read skips and the positions it delivered (issue 20),
// which requests, the journal and saved states carry as [begin, end) pairs.
#ifndef SLUICE_SERVICE_INT_RANGES_H_
#define SLUICE_SERVICE_INT_RANGES_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"

namespace sluice {

using IntRanges = std::map<int64_t, int64_t>;

// Checks [begin, end) pairs, ascending and apart, each begin >= `lowest`,
// without building anything; InvalidArgument naming `field` otherwise.
absl::Status CheckPairs(const google::protobuf::RepeatedField<int64_t>& pairs, int64_t lowest,
                        const std::string& field);
// Reads such pairs (CheckPairs) into ranges.
absl::StatusOr<IntRanges> RangesFromPairs(const google::protobuf::RepeatedField<int64_t>& pairs,
                                          int64_t lowest, const std::string& field);
void AppendPairs(const IntRanges& ranges, google::protobuf::RepeatedField<int64_t>* pairs);

// Adds [begin, end), joining the ranges it touches.
void InsertRange(IntRanges* ranges, int64_t begin, int64_t end);
// Whether `value` is in a range.
bool InRanges(const IntRanges& ranges, int64_t value);
// Whether every value in [begin, end) is (also when it is empty).
bool CoversRange(const IntRanges& ranges, int64_t begin, int64_t end);
// Whether any value in [begin, end) is.
bool OverlapsRange(const IntRanges& ranges, int64_t begin, int64_t end);

}  // namespace sluice

#endif  // SLUICE_SERVICE_INT_RANGES_H_
