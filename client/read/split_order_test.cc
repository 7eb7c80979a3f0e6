#include "client/read/split_order.h"

#include <catch2/catch.hpp>
#include <deque>
#include <utility>
#include <vector>

namespace sluice::reader {
namespace {

Element Value(int64_t value) { return Element::Of(Tensor::Scalar<int64_t>(value)); }

// The (seq, position, value) of what Release lets go.
std::vector<std::vector<int64_t>> Released(SplitOrder& order, bool all = false) {
  std::deque<SplitOrder::Tagged> ready;
  if (all) {
    order.ReleaseAll(&ready);
  } else {
    order.Release(&ready);
  }
  std::vector<std::vector<int64_t>> out;
  for (const SplitOrder::Tagged& t : ready) {
    out.push_back({t.seq, t.position, *t.element.components[0].data<int64_t>()});
  }
  return out;
}

TEST_CASE("split_order: later splits wait, the next split flows as it comes", "[client][deterministic]") {
  static_assert(kFirstSplitSeq == 1);
  SplitOrder order;
  CHECK(order.next_seq() == 1);
  order.Add(2, 0, Value(20));
  order.Add(2, 1, Value(21));
  order.Complete(2);
  CHECK(Released(order).empty());
  CHECK(order.waiting() == 2);
  order.Add(1, 0, Value(10));
  CHECK(Released(order) == std::vector<std::vector<int64_t>>{{1, 0, 10}});
  CHECK(order.next_seq() == 1);
  order.Add(1, 1, Value(11));
  order.Complete(1);
  // Split 1's end lets split 2 go, which was complete already; split 3 has
  // not begun, so it is next.
  CHECK(Released(order) == std::vector<std::vector<int64_t>>{{1, 1, 11}, {2, 0, 20}, {2, 1, 21}});
  CHECK(order.next_seq() == 3);
  CHECK(order.waiting() == 0);
}

TEST_CASE("split_order: the next split's elements pass straight only while none of it waits",
          "[client][deterministic]") {
  SplitOrder order;
  CHECK(order.PassesStraight(1));
  CHECK_FALSE(order.PassesStraight(2));
  order.Add(2, 0, Value(20));
  order.Complete(1);
  // Split 2 is next now, but its first element waits: the next goes behind it.
  CHECK(Released(order) == std::vector<std::vector<int64_t>>{{2, 0, 20}});
  CHECK(order.next_seq() == 2);
  CHECK_FALSE(order.PassesStraight(2));
  order.Add(2, 1, Value(21));
  order.Complete(2);
  CHECK(Released(order) == std::vector<std::vector<int64_t>>{{2, 1, 21}});
  CHECK(order.PassesStraight(3));
}

TEST_CASE("split_order: a rerun split reported complete again changes nothing", "[client][deterministic]") {
  SplitOrder order;
  order.Add(2, 0, Value(20));  // split 2 begun before split 1 ended
  order.Complete(1);
  CHECK(Released(order) == std::vector<std::vector<int64_t>>{{2, 0, 20}});
  order.Add(2, 1, Value(21));  // waits behind split 2's entry
  order.Complete(1);           // split 1's rerun ends too, after it went out
  // Split 2's next element must queue behind the one waiting, not pass it.
  CHECK_FALSE(order.PassesStraight(2));
  order.Add(2, 2, Value(22));
  CHECK(Released(order) == std::vector<std::vector<int64_t>>{{2, 1, 21}, {2, 2, 22}});
}

TEST_CASE("split_order: an empty split and a restored read's done splits are passed over",
          "[client][deterministic]") {
  SplitDeliveries restored;
  restored.Add(1, 0);
  restored.SetSize(1, 1);
  restored.SetSize(2, 0);
  restored.Add(4, 0);  // split 4 in part: not passed over
  SplitOrder order(restored);
  CHECK(order.next_seq() == 3);
  order.Add(4, 1, Value(41));
  order.Complete(4);
  order.Complete(3);  // split 3 produced nothing
  CHECK(Released(order) == std::vector<std::vector<int64_t>>{{4, 1, 41}});
  CHECK(order.next_seq() == 5);
}

TEST_CASE("split_order: at the read's end what still waits goes in split order", "[client][deterministic]") {
  SplitOrder order;
  order.Add(5, 0, Value(50));
  order.Add(2, 0, Value(20));
  order.Add(2, 1, Value(21));
  CHECK(Released(order).empty());
  CHECK(order.waiting() == 3);
  CHECK(Released(order, /*all=*/true) ==
        std::vector<std::vector<int64_t>>{{2, 0, 20}, {2, 1, 21}, {5, 0, 50}});
  CHECK(order.waiting() == 0);
}

}  // namespace
}  // namespace sluice::reader
