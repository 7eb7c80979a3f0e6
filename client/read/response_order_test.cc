#include "client/read/response_order.h"

#include <catch2/catch.hpp>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/tensor.h"

namespace sluice::reader {
namespace {

using Released = std::vector<std::vector<int64_t>>;

// `count` elements numbered from `first_index`, as the worker sends them.
ElementsResponse Response(int64_t first_index, int64_t count, SplitTags tags = {}) {
  ElementsResponse response;
  response.first_index = first_index;
  for (int64_t i = 0; i < count; ++i) {
    response.elements.push_back(Element::Of(Tensor::Scalar<int64_t>(first_index + i)));
  }
  response.tags = std::move(tags);
  return response;
}

// The numbers of each response whose turn has come, in the order given;
// `tags` gets the tags of the last.
Released PopAll(ResponseOrder& order, SplitTags* tags = nullptr) {
  Released released;
  while (std::optional<ResponseOrder::Ready> ready = order.PopReady()) {
    std::vector<int64_t> numbers;
    for (const Element& e : ready->elements) numbers.push_back(*e.components[0].data<int64_t>());
    if (!numbers.empty()) CHECK(numbers.front() == ready->first_index);
    released.push_back(std::move(numbers));
    if (tags != nullptr) *tags = ready->tags;
  }
  return released;
}

TEST_CASE("response_order: a response with nothing before it out goes at once", "[client][response_order]") {
  ResponseOrder order;
  const int64_t stamp = order.Send();
  CHECK(stamp == 1);
  order.Returned(stamp);
  REQUIRE(order.Hold(Response(0, 3)).ok());
  CHECK(PopAll(order) == Released{{0, 1, 2}});
  CHECK(PopAll(order).empty());
}

TEST_CASE("response_order: responses wait for every request sent before they arrived",
          "[client][response_order]") {
  ResponseOrder order;
  const int64_t first = order.Send();
  const int64_t second = order.Send();
  const int64_t third = order.Send();
  CHECK(order.sent() == 3);
  // The second request's answer comes first; the first may hold earlier
  // elements.
  order.Returned(second);
  REQUIRE(order.Hold(Response(10, 2)).ok());
  CHECK(PopAll(order).empty());
  // The first comes, from index 0: nothing can come before it, though the
  // third is still out. Elements 3 to 9 may be in the third.
  order.Returned(first);
  REQUIRE(order.Hold(Response(0, 3)).ok());
  CHECK(PopAll(order) == Released{{0, 1, 2}});
  // The third fails (or is empty): the second goes.
  order.Returned(third);
  CHECK(PopAll(order) == Released{{10, 11}});
}

TEST_CASE("response_order: a request sent after a response arrived does not hold it back",
          "[client][response_order]") {
  ResponseOrder order;
  const int64_t first = order.Send();
  const int64_t second = order.Send();
  order.Returned(first);
  REQUIRE(order.Hold(Response(0, 2)).ok());  // the second is still out, but nothing precedes index 0
  CHECK(PopAll(order) == Released{{0, 1}});
  const int64_t third = order.Send();
  CHECK(third == 3);
  order.Returned(second);
  REQUIRE(order.Hold(Response(4, 2)).ok());  // 2 and 3 may be in the third, sent before this arrived
  CHECK(PopAll(order).empty());
  const int64_t fourth = order.Send();  // sent after it arrived: cannot hold 2 or 3
  order.Returned(third);                // empty: 2 and 3 went to another consumer
  CHECK(PopAll(order) == Released{{4, 5}});
  order.Returned(fourth);
}

TEST_CASE("response_order: a response that starts where the last one ended goes though requests are out",
          "[client][response_order]") {
  ResponseOrder order;
  const int64_t first = order.Send();
  const int64_t second = order.Send();
  const int64_t third = order.Send();
  // The third request got the task's first elements; the others, parked at
  // the worker, may only get later ones.
  order.Returned(third);
  REQUIRE(order.Hold(Response(0, 2)).ok());
  CHECK(PopAll(order) == Released{{0, 1}});
  order.Returned(first);
  REQUIRE(order.Hold(Response(2, 1)).ok());
  CHECK(PopAll(order) == Released{{2}});
  // A gap (index 3 not here): the response waits for the second request.
  const int64_t fourth = order.Send();
  order.Returned(fourth);
  REQUIRE(order.Hold(Response(4, 1)).ok());
  CHECK(PopAll(order).empty());
  order.Returned(second);
  REQUIRE(order.Hold(Response(3, 1)).ok());
  CHECK(PopAll(order) == Released{{3}, {4}});
}

TEST_CASE("response_order: a response reporting splits complete merges with the next",
          "[client][response_order]") {
  const SplitTags elements_tags{.split_seqs = {8, 8}, .split_positions = {0, 1}, .completed_splits = {}};
  const SplitTags merged{.split_seqs = {8, 8}, .split_positions = {0, 1}, .completed_splits = {7}};
  // Empty but for split 7's completion; the next elements are at index 4.
  // They merge whichever comes back first.
  for (bool completion_first : {true, false}) {
    ResponseOrder order;
    const int64_t first = order.Send();
    const int64_t second = order.Send();
    order.Returned(first);
    REQUIRE(order
                .Hold(completion_first ? Response(4, 0, {.completed_splits = {7}})
                                       : Response(4, 2, elements_tags))
                .ok());
    order.Returned(second);
    REQUIRE(order
                .Hold(completion_first ? Response(4, 2, elements_tags)
                                       : Response(4, 0, {.completed_splits = {7}}))
                .ok());
    SplitTags tags;
    CHECK(PopAll(order, &tags) == Released{{4, 5}});
    CHECK(tags == merged);
  }
}

TEST_CASE("response_order: elements at indices already received are DataLoss naming them",
          "[client][response_order]") {
  ResponseOrder order;
  order.Returned(order.Send());
  REQUIRE(order.Hold(Response(0, 3)).ok());
  CHECK(PopAll(order) == Released{{0, 1, 2}});
  // A fake worker's answers from first_index 0, 1 and 2, 3 elements each:
  // after the first, each repeats what came.
  for (int64_t first : {0, 1, 2}) {
    order.Returned(order.Send());
    CHECK(order.Hold(Response(first, 3)) ==
          absl::DataLossError(absl::StrCat("a response of the task's elements [", first, ", ", first + 3,
                                           ") came after elements up to index 3 were received: a worker "
                                           "hands out each index once")));
  }
  CHECK(PopAll(order).empty());
  // An empty answer that reports a split complete may come at an index
  // already passed (a response sent after it took the next elements).
  order.Returned(order.Send());
  CHECK(order.Hold(Response(2, 0, {.completed_splits = {7}})).ok());
  SplitTags tags;
  CHECK(PopAll(order, &tags) == Released{std::vector<int64_t>{}});
  CHECK(tags.completed_splits == std::vector<int64_t>{7});
  order.Returned(order.Send());
  REQUIRE(order.Hold(Response(3, 2)).ok());
  CHECK(PopAll(order) == Released{{3, 4}});
}

TEST_CASE("response_order: elements overlapping a held response are DataLoss naming both ranges",
          "[client][response_order]") {
  ResponseOrder order;
  const int64_t first = order.Send();
  const int64_t second = order.Send();
  const int64_t third = order.Send();
  const int64_t fourth = order.Send();
  order.Returned(second);
  REQUIRE(order.Hold(Response(10, 5)).ok());  // waits for the first
  order.Returned(third);
  CHECK(order.Hold(Response(12, 5)) ==
        absl::DataLossError(
            "a response of the task's elements [12, 17) overlaps [10, 15), held from an earlier "
            "response: a worker hands out each index once"));
  CHECK(
      order.Hold(Response(8, 3)) ==
      absl::DataLossError("a response of the task's elements [8, 11) overlaps [10, 15), held from an earlier "
                          "response: a worker hands out each index once"));
  CHECK(order.Hold(Response(10, 1)) ==
        absl::DataLossError(
            "a response of the task's elements [10, 11) overlaps [10, 15), held from an earlier "
            "response: a worker hands out each index once"));
  CHECK(order.Hold(Response(-1, 1)) == absl::DataLossError("a response's first_index -1 is out of range"));
  CHECK(order.Hold(Response(std::numeric_limits<int64_t>::max(), 1)) ==
        absl::DataLossError("a response's first_index 9223372036854775807 is out of range"));
  // Nothing refused was held: [15, 16), just past [10, 15), is accepted.
  order.Returned(fourth);
  REQUIRE(order.Hold(Response(15, 1)).ok());
  CHECK(PopAll(order).empty());
  order.Returned(first);
  REQUIRE(order.Hold(Response(0, 10)).ok());
  CHECK(PopAll(order) == Released{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}, {15}});
}

}  // namespace
}  // namespace sluice::reader
