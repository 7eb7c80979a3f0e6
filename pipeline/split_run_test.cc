#include "pipeline/split_run.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace sluice {
namespace {

TEST_CASE("Consecutive splits join into runs, and runs give back their parts", "[splits]") {
  // Splits of 10 over 46 positions, as an IndexSplitProvider cuts them,
  // numbered from 3 as the dispatcher would.
  const std::vector<Split> splits = {{0, 10, 3}, {10, 20, 4}, {20, 30, 5}, {30, 40, 6}, {40, 46, 7}};
  Split run = splits[0];
  for (size_t i = 1; i < splits.size(); ++i) CHECK(ExtendSplitRun(&run, splits[i]));
  CHECK(run == Split{0, 46, 3, 5, 10});
  // After the short last split nothing more joins.
  CHECK_FALSE(ExtendSplitRun(&run, Split{46, 50, 8}));

  Split other{0, 10, 1};
  CHECK_FALSE(ExtendSplitRun(&other, Split{10, 20, 3}));  // seq gap
  CHECK_FALSE(ExtendSplitRun(&other, Split{11, 20, 2}));  // position gap
  CHECK_FALSE(ExtendSplitRun(&other, Split{10, 21, 2}));  // longer than the run's splits
  CHECK(other == Split{0, 10, 1});
  CHECK(ExtendSplitRun(&other, Split{10, 15, 2}));  // a shorter last split
  CHECK(other == Split{0, 15, 1, 2, 10});

  CHECK(SplitRunPart(run, 0, 1) == Split{0, 10, 3});
  CHECK(SplitRunPart(run, 1, 3) == Split{10, 40, 4, 3, 10});
  CHECK(SplitRunPart(run, 4, 1) == Split{40, 46, 7});
  CHECK(SplitRunPart(run, 2, 3) == Split{20, 46, 5, 3, 10});
  CHECK(SplitRunPart(Split{5, 9, 2}, 0, 1) == Split{5, 9, 2});
}

TEST_CASE("A run's split size must be positive and its total must fit int64", "[splits]") {
  // A single split needs no split size.
  CHECK(ValidSplitRunSize(Split{0, 10, 1}));
  CHECK(ValidSplitRunSize(Split{0, 10, 1, 1, 0}));
  CHECK(ValidSplitRunSize(Split{0, 46, 3, 5, 10}));
  CHECK_FALSE(ValidSplitRunSize(Split{0, 46, 3, 5, 0}));
  CHECK_FALSE(ValidSplitRunSize(Split{0, 46, 3, 5, -10}));
  // count * split_size at the edge of int64.
  CHECK(ValidSplitRunSize(Split{0, 0, 1, 2, INT64_MAX / 2}));
  CHECK_FALSE(ValidSplitRunSize(Split{0, 0, 1, 2, INT64_MAX / 2 + 1}));
  CHECK(ValidSplitRunSize(Split{0, 0, 1, INT64_MAX, 1}));
  CHECK_FALSE(ValidSplitRunSize(Split{0, 0, 1, INT64_MAX, 2}));
  // No run has fewer than one split.
  CHECK_FALSE(ValidSplitRunSize(Split{0, 10, 1, 0, 10}));
  CHECK_FALSE(ValidSplitRunSize(Split{0, 10, 1, -1, 10}));
}

}  // namespace
}  // namespace sluice
