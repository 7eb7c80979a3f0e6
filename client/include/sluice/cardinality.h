// The cardinality of a dataset that never ends, and of one whose length is
// not known before it is read (after filter, for example): what
// Dataset::Cardinality returns besides a count.
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_CARDINALITY_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_CARDINALITY_H_

#include <cstdint>

namespace sluice {

inline constexpr int64_t kInfiniteCardinality = -1;
inline constexpr int64_t kUnknownCardinality = -2;

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_CARDINALITY_H_
