#include "client/read/split_position_filter.h"

#include <catch2/catch.hpp>
#include <vector>

namespace sluice::reader {
namespace {

std::vector<int64_t> Delivered(SplitPositionFilter& filter, int64_t seq, int64_t first, int64_t last) {
  std::vector<int64_t> delivered;
  for (int64_t position = first; position <= last; ++position) {
    if (filter.Accept(seq, position)) delivered.push_back(position);
  }
  return delivered;
}

TEST_CASE("split_position_filter: a rerun's repeated start is dropped", "[client][exactly_once]") {
  SplitPositionFilter filter(/*sole_reader=*/true);
  CHECK(Delivered(filter, 7, 0, 5) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  // The worker was lost; the split runs again from its start.
  CHECK(Delivered(filter, 7, 0, 9) == std::vector<int64_t>{6, 7, 8, 9});
  CHECK(filter.CompleteInOrder(7));
  CHECK(filter.gapped().empty());
}

TEST_CASE("split_position_filter: positions past a lost response wait for the rerun",
          "[client][exactly_once]") {
  SplitPositionFilter filter(/*sole_reader=*/true);
  // Positions 0-5 were in a response lost with its worker; 6-63 arrived.
  CHECK(Delivered(filter, 594, 6, 63).empty());
  CHECK_FALSE(filter.CompleteInOrder(594));
  CHECK(filter.gapped() == std::set<int64_t>{594});
  // Other splits are not held up.
  CHECK(Delivered(filter, 595, 0, 2) == std::vector<int64_t>{0, 1, 2});
  // The rerun delivers everything, once.
  const std::vector<int64_t> rerun = Delivered(filter, 594, 0, 63);
  REQUIRE(rerun.size() == 64);
  CHECK(rerun.front() == 0);
  CHECK(rerun.back() == 63);
  CHECK(filter.CompleteInOrder(594));
  CHECK(filter.gapped().empty());
}

TEST_CASE("split_position_filter: a consumer of a shared job takes every position it has not taken",
          "[client][exactly_once]") {
  // Another consumer took positions 0-9 and 20-29.
  SplitPositionFilter filter(/*sole_reader=*/false);
  CHECK(Delivered(filter, 3, 10, 19).size() == 10);
  CHECK(Delivered(filter, 3, 30, 39).size() == 10);
  CHECK(filter.CompleteInOrder(3));
  CHECK(filter.gapped().empty());
}

TEST_CASE("split_position_filter: a sole consumer of a shared job reads a rerun without loss or repeat",
          "[client][exactly_once]") {
  // It took 10-19 and 30-39 of split 3; 0-9 and 20-29 died in flight with
  // the worker. The rerun of split 3 (0-41) gives it exactly what it lacks:
  // positions below the last it took are not skipped.
  SplitPositionFilter filter(/*sole_reader=*/false);
  CHECK(Delivered(filter, 3, 10, 19).size() == 10);
  CHECK(Delivered(filter, 3, 30, 39).size() == 10);
  std::vector<int64_t> expected;
  for (int64_t p = 0; p < 10; ++p) expected.push_back(p);
  for (int64_t p = 20; p < 30; ++p) expected.push_back(p);
  expected.push_back(40);
  expected.push_back(41);
  CHECK(Delivered(filter, 3, 0, 41) == expected);
  // A second rerun repeats everything: nothing passes.
  CHECK(Delivered(filter, 3, 0, 41).empty());
  // Out of order and in any split.
  CHECK(filter.Accept(9, 5));
  CHECK(filter.Accept(9, 2));
  CHECK_FALSE(filter.Accept(9, 5));
  CHECK(filter.Accept(9, 3));
  CHECK(filter.Accept(9, 4));
  CHECK_FALSE(filter.Accept(9, 4));
  CHECK(filter.Accept(9, 6));
  CHECK(filter.gapped().empty());
}

TEST_CASE("split_position_filter: a shared consumer reports what it took of held splits, within a bound",
          "[client][exactly_once]") {
  SplitPositionFilter filter(/*sole_reader=*/false);
  CHECK(Delivered(filter, 2, 0, 4).size() == 5);
  CHECK(Delivered(filter, 2, 8, 9).size() == 2);
  CHECK(Delivered(filter, 5, 3, 3).size() == 1);
  CHECK(Delivered(filter, 7, 0, 1).size() == 2);
  using Taken = std::vector<std::pair<int64_t, IntRanges>>;
  bool cut = true;
  // Held splits 1-5: 2 and 5 were taken from.
  CHECK(filter.Taken({{1, 6}}, 100, &cut) == Taken{{2, {{0, 5}, {8, 10}}}, {5, {{3, 4}}}});
  CHECK_FALSE(cut);
  CHECK(filter.Taken({{1, 3}, {7, 8}}, 100, &cut) == Taken{{2, {{0, 5}, {8, 10}}}, {7, {{0, 2}}}});
  CHECK_FALSE(cut);
  // Split 2 costs 5 numbers (its seq and two pairs): with 7, split 5 (3
  // more) does not fit, and the answer says it was cut.
  CHECK(filter.Taken({{1, 6}}, 7, &cut) == Taken{{2, {{0, 5}, {8, 10}}}});
  CHECK(cut);
  CHECK(filter.Taken({{1, 6}}, 4, &cut).empty());
  CHECK(cut);
  // A split whose completion was acknowledged is forgotten, and so is every
  // split below the dispatcher's lowest one still out.
  filter.Forget(2);
  CHECK(filter.Taken({{1, 8}}, 100, &cut) == Taken{{5, {{3, 4}}}, {7, {{0, 2}}}});
  filter.ForgetBelow(7);
  CHECK(filter.Taken({{1, 8}}, 100, &cut) == Taken{{7, {{0, 2}}}});
  // A sole reader keeps no taken positions: it reads a whole rerun.
  SplitPositionFilter sole(/*sole_reader=*/true);
  CHECK(sole.Accept(2, 0));
  CHECK(sole.Taken({{1, 6}}, 100, &cut).empty());
}

}  // namespace
}  // namespace sluice::reader
