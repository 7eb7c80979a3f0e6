#include "client/read/split_deliveries.h"

#include <catch2/catch.hpp>
#include <vector>

#include "client/read/split_position_filter.h"

namespace sluice::reader {
namespace {

TEST_CASE("split_deliveries: positions join into ranges, and a split whose size is covered is done",
          "[client][checkpoint]") {
  SplitDeliveries delivered;
  delivered.Add(4, 0);
  delivered.Add(4, 2);
  delivered.Add(4, 1);
  delivered.Add(7, 5);
  CHECK(delivered.Contains(4, 1));
  CHECK_FALSE(delivered.Contains(4, 3));
  CHECK(delivered.NextUndelivered(4, 0) == 3);
  CHECK(delivered.NextUndelivered(7, 0) == 0);
  CHECK(delivered.NextUndelivered(7, 5) == 6);
  delivered.SetSize(4, 4);
  CHECK(delivered.CountDoneSplits() == 0);
  delivered.Add(4, 3);
  CHECK(delivered.DoneSplitPairs() == std::vector<int64_t>{4, 5});
  CHECK(delivered.Contains(4, 100));  // a done split holds every position
  delivered.SetSize(5, 0);            // a split that produced nothing
  CHECK(delivered.DoneSplitPairs() == std::vector<int64_t>{4, 6});
  CHECK(delivered.CountPartialSplits() == 1);

  const proto::ServiceReadState saved = delivered.ToProto();
  CHECK(std::vector<int64_t>(saved.done_splits().begin(), saved.done_splits().end()) ==
        std::vector<int64_t>{4, 6});
  REQUIRE(saved.partial_splits_size() == 1);
  CHECK(saved.partial_splits(0).seq() == 7);
  CHECK(std::vector<int64_t>(saved.partial_splits(0).delivered().begin(),
                             saved.partial_splits(0).delivered().end()) == std::vector<int64_t>{5, 6});
  CHECK(saved.partial_splits(0).size() == -1);
  absl::StatusOr<SplitDeliveries> restored = SplitDeliveries::FromProto(saved);
  REQUIRE(restored.ok());
  CHECK(restored->ToProto().SerializeAsString() == saved.SerializeAsString());
}

TEST_CASE("split_deliveries: elements in order extend the last range, copies apart", "[client][checkpoint]") {
  SplitDeliveries delivered;
  for (int64_t p = 0; p < 100; ++p) delivered.Add(10, p);
  for (int64_t p = 0; p < 10; ++p) delivered.Add(11, p);
  delivered.Add(10, 100);
  SplitDeliveries copy = delivered;
  copy.Add(10, 101);
  delivered.Add(11, 10);
  CHECK(delivered.NextUndelivered(10, 0) == 101);
  CHECK(delivered.NextUndelivered(11, 0) == 11);
  CHECK(copy.NextUndelivered(10, 0) == 102);
  CHECK(copy.NextUndelivered(11, 0) == 10);
  copy.SetSize(10, 102);
  CHECK(copy.DoneSplitPairs() == std::vector<int64_t>{10, 11});
  copy.Add(10, 102);  // past a done split: nothing changes
  CHECK(copy.CountPartialSplits() == 1);
  SplitDeliveries moved = std::move(copy);
  moved.Add(11, 10);
  CHECK(moved.NextUndelivered(11, 0) == 11);
}

TEST_CASE("split_deliveries: consumers' deliveries merge by union", "[client][checkpoint]") {
  // A shared job: consumers took alternate responses of split 3 (size 6).
  SplitDeliveries a, b;
  for (int64_t p : {0, 1, 4}) a.Add(3, p);
  for (int64_t p : {2, 3}) b.Add(3, p);
  b.SetSize(3, 6);
  a.Add(9, 0);
  SplitDeliveries merged = a;
  merged.Merge(b);
  CHECK(merged.CountDoneSplits() == 0);
  CHECK(merged.NextUndelivered(3, 0) == 5);
  SplitDeliveries c;
  c.Add(3, 5);
  merged.Merge(c);
  CHECK(merged.DoneSplitPairs() == std::vector<int64_t>{3, 4});
  CHECK(merged.Contains(9, 0));
  CHECK_FALSE(merged.Contains(9, 1));
}

TEST_CASE("split_deliveries: a malformed state is refused, naming what is wrong", "[client][checkpoint]") {
  proto::ServiceReadState odd;
  odd.add_done_splits(1);
  CHECK(SplitDeliveries::FromProto(odd).status().message() ==
        "service read state: done_splits must hold [begin, end) pairs, not 1 numbers");
  proto::ServiceReadState twice;
  for (int64_t seq : {1, 3}) twice.add_done_splits(seq);
  twice.add_partial_splits()->set_seq(2);
  CHECK(SplitDeliveries::FromProto(twice).status().message() ==
        "service read state: split 2 is below 1, listed twice, or also done");
  proto::ServiceReadState past_size;
  proto::SplitDelivery* split = past_size.add_partial_splits();
  split->set_seq(5);
  split->add_delivered(0);
  split->add_delivered(9);
  split->set_size(4);
  CHECK(SplitDeliveries::FromProto(past_size).status().message() ==
        "service read state: split 5 has size 4, below -1 or below a position delivered");
  proto::ServiceReadState backwards;
  split = backwards.add_partial_splits();
  split->set_seq(5);
  for (int64_t p : {4, 6, 2, 3}) split->add_delivered(p);
  CHECK(SplitDeliveries::FromProto(backwards).status().message() ==
        "service read state: split 5 has [2, 3): empty, below 0, or not after the range before");
}

TEST_CASE("split_position_filter: a restored read drops what was delivered before its save",
          "[client][checkpoint]") {
  SplitDeliveries restored;
  for (int64_t p : {0, 1, 3}) restored.Add(2, p);
  SplitPositionFilter sole(/*sole_reader=*/true, restored);
  // The rerun of split 2 gives 0 to 4: 2 and 4 are new; 0, 1, 3 repeats.
  std::vector<int64_t> accepted;
  for (int64_t p = 0; p < 5; ++p) {
    if (sole.Accept(2, p)) accepted.push_back(p);
  }
  CHECK(accepted == std::vector<int64_t>{2, 4});
  CHECK(sole.gapped().empty());
  // Position 4 of a fresh split before 0 is a gap, as without a restore.
  CHECK_FALSE(sole.Accept(8, 4));
  CHECK(sole.gapped().contains(8));

  SplitPositionFilter shared(/*sole_reader=*/false, restored);
  CHECK_FALSE(shared.Accept(2, 1));
  CHECK(shared.Accept(2, 4));
  CHECK_FALSE(shared.Accept(2, 3));
}

}  // namespace
}  // namespace sluice::reader

namespace sluice::reader {
namespace {

TEST_CASE("split_deliveries: parallel_epochs positions per worker save, merge and end",
          "[client][checkpoint]") {
  SplitDeliveries a;
  for (int64_t position = 0; position < 5; ++position) a.AddWorkerPosition("w1:1", position);
  a.AddWorkerPosition("w1:1", 9);
  SplitDeliveries b;
  b.AddWorkerPosition("w1:1", 5);
  b.AddWorkerPosition("w2:2", 0);
  b.SetWorkerEnd("w2:2", 1);
  a.Merge(b);
  CHECK(a.worker_positions().at("w1:1") == IntRanges{{0, 6}, {9, 10}});
  CHECK(a.worker_positions().at("w2:2") == IntRanges{{0, kEpochEnd}});

  absl::StatusOr<SplitDeliveries> back = SplitDeliveries::FromProto(a.ToProto());
  REQUIRE(back.ok());
  CHECK(back->worker_positions() == a.worker_positions());
  proto::ServiceReadState twice = a.ToProto();
  *twice.add_worker_positions() = twice.worker_positions(0);
  CHECK(SplitDeliveries::FromProto(twice).status().message() ==
        "service read state: worker_positions: worker address 'w1:1' is empty or listed twice");
}

TEST_CASE("split_deliveries: a restored task's indices map past the positions it skips",
          "[client][checkpoint]") {
  SkippedPositions skipped(IntRanges{{0, 5}, {7, 9}, {12, kEpochEnd}});
  CHECK(skipped.PositionAt(0) == 5);
  CHECK(skipped.PositionAt(2) == 9);
  CHECK(skipped.PositionAt(4) == 11);
  // In order, with the cursor, the same.
  std::vector<int64_t> positions;
  for (int64_t index = 0; index < 5; ++index) positions.push_back(skipped.PositionOf(index));
  CHECK(positions == std::vector<int64_t>{5, 6, 9, 10, 11});
  SkippedPositions none;
  CHECK(none.PositionOf(3) == 3);
}

}  // namespace
}  // namespace sluice::reader
