#include "client/response_order.h"

#include <catch2/catch.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "sluice/tensor.h"

namespace sluice {
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
  order.Hold(Response(0, 3));
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
  order.Hold(Response(10, 2));
  CHECK(PopAll(order).empty());
  // The first comes, from index 0: nothing can come before it, though the
  // third is still out. Elements 3 to 9 may be in the third.
  order.Returned(first);
  order.Hold(Response(0, 3));
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
  order.Hold(Response(0, 2));  // the second is still out, but nothing precedes index 0
  CHECK(PopAll(order) == Released{{0, 1}});
  const int64_t third = order.Send();
  CHECK(third == 3);
  order.Returned(second);
  order.Hold(Response(4, 2));  // 2 and 3 may be in the third, sent before this arrived
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
  order.Hold(Response(0, 2));
  CHECK(PopAll(order) == Released{{0, 1}});
  order.Returned(first);
  order.Hold(Response(2, 1));
  CHECK(PopAll(order) == Released{{2}});
  // A gap (index 3 not here): the response waits for the second request.
  const int64_t fourth = order.Send();
  order.Returned(fourth);
  order.Hold(Response(4, 1));
  CHECK(PopAll(order).empty());
  order.Returned(second);
  order.Hold(Response(3, 1));
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
    order.Hold(completion_first ? Response(4, 0, {.completed_splits = {7}}) : Response(4, 2, elements_tags));
    order.Returned(second);
    order.Hold(completion_first ? Response(4, 2, elements_tags) : Response(4, 0, {.completed_splits = {7}}));
    SplitTags tags;
    CHECK(PopAll(order, &tags) == Released{{4, 5}});
    CHECK(tags == merged);
  }
}

}  // namespace
}  // namespace sluice
