// Checks that a pipeline saved after any number of elements and restored
// into a fresh iterator goes on with exactly the elements of one
// uninterrupted run (issue 20, section 1), for every op's checkpoint test.
#ifndef SLUICE_TESTS_TESTING_CHECKPOINT_UTIL_H_
#define SLUICE_TESTS_TESTING_CHECKPOINT_UTIL_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "sluice/dataset.h"
#include "sluice/iterator.h"

namespace sluice::testing {

inline constexpr int64_t kReadLimit = 400;  // bounds infinite pipelines

inline std::vector<std::string> Read(Iterator& it, int64_t limit) {
  std::vector<std::string> out;
  while (static_cast<int64_t>(out.size()) < limit) {
    absl::StatusOr<std::optional<Element>> next = it.GetNextAsOptional();
    INFO(next.status().ToString());
    REQUIRE(next.ok());
    if (!next->has_value()) break;
    out.push_back(ElementToJson(**next));
  }
  return out;
}

inline std::vector<std::string> Uninterrupted(const Dataset& dataset) {
  absl::StatusOr<Iterator> it = dataset.MakeIterator();
  INFO(it.status().ToString());
  REQUIRE(it.ok());
  return Read(*it, kReadLimit);
}

// Reads `before` elements, saves, restores into a fresh iterator and reads
// the rest there; also checks that the saving iterator goes on unchanged.
inline void CheckResumesAt(const Dataset& dataset, int64_t before, const std::vector<std::string>& expected) {
  INFO("saved after " << before << " elements");
  absl::StatusOr<Iterator> first = dataset.MakeIterator();
  REQUIRE(first.ok());
  std::vector<std::string> seen = Read(*first, before);
  absl::StatusOr<std::string> state = first->Save();
  INFO(state.status().ToString());
  REQUIRE(state.ok());
  absl::StatusOr<Iterator> restored = dataset.MakeIterator(*state);
  INFO(restored.status().ToString());
  REQUIRE(restored.ok());
  const int64_t rest = kReadLimit - static_cast<int64_t>(seen.size());
  std::vector<std::string> after = Read(*restored, rest);
  std::vector<std::string> resumed = seen;
  resumed.insert(resumed.end(), after.begin(), after.end());
  CHECK(resumed == expected);
  std::vector<std::string> went_on = seen;
  for (const std::string& e : Read(*first, rest)) went_on.push_back(e);
  CHECK(went_on == expected);
}

inline void CheckResumesEverywhere(const Dataset& dataset) {
  const std::vector<std::string> expected = Uninterrupted(dataset);
  REQUIRE(!expected.empty());
  for (int64_t before = 0; before <= static_cast<int64_t>(expected.size()); before += 1 + before / 4) {
    CheckResumesAt(dataset, before, expected);
  }
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_CHECKPOINT_UTIL_H_
