#include "client/request_sizing.h"

#include <catch2/catch.hpp>

namespace sluice {
namespace {

TEST_CASE("request_sizing: a request takes up to half the budget and waits for half of that",
          "[client][request_sizing]") {
  RequestSizing sizing(/*max_outstanding=*/64);
  CHECK(sizing.request_share() == 32);
  CHECK(sizing.min_request() == 16);
  CHECK_FALSE(sizing.WorthAsking(15));
  CHECK(sizing.WorthAsking(16));

  // A budget of one or three still allows a request of one element.
  RequestSizing one(/*max_outstanding=*/1);
  CHECK(one.request_share() == 1);
  CHECK(one.min_request() == 1);
  CHECK_FALSE(one.WorthAsking(0));
  CHECK(one.WorthAsking(1));
  RequestSizing three(/*max_outstanding=*/3);
  CHECK(three.request_share() == 1);
  CHECK(three.min_request() == 1);
}

TEST_CASE("request_sizing: the first request asks for one element, which measures",
          "[client][request_sizing]") {
  RequestSizing sizing(/*max_outstanding=*/64);
  CHECK(sizing.ElementsForTargetBytes() == 1);
  CHECK(sizing.ElementsToAsk(64) == 1);
}

TEST_CASE("request_sizing: requests come to about 4 MiB", "[client][request_sizing]") {
  RequestSizing sizing(/*max_outstanding=*/1000);
  // 1 MiB elements: four to a request.
  sizing.Observe(1 << 20);
  CHECK(sizing.ElementsForTargetBytes() == 4);
  CHECK(sizing.ElementsToAsk(1000) == 4);
  // Averaging 3 MiB over two elements: 1.5 MiB, so two to a request.
  sizing.Observe(2 << 20);
  CHECK(sizing.ElementsForTargetBytes() == 2);
  // Elements of 8 MiB still make requests of one.
  RequestSizing large(/*max_outstanding=*/1000);
  large.Observe(8 << 20);
  CHECK(large.ElementsForTargetBytes() == 1);
  // Empty elements count as one byte each.
  RequestSizing empty(/*max_outstanding=*/1000);
  empty.Observe(0);
  CHECK(empty.ElementsForTargetBytes() == 4 << 20);
}

TEST_CASE("request_sizing: small elements are capped by the share, the room and 64",
          "[client][request_sizing]") {
  RequestSizing sizing(/*max_outstanding=*/1000);
  sizing.Observe(100);
  CHECK(sizing.ElementsForTargetBytes() == 41943);
  CHECK(sizing.ElementsToAsk(1000) == 64);  // kMaxElementsPerRequest
  CHECK(sizing.ElementsToAsk(20) == 20);    // the room

  RequestSizing small_budget(/*max_outstanding=*/40);
  small_budget.Observe(100);
  CHECK(small_budget.ElementsToAsk(40) == 20);  // the share, half the budget
}

TEST_CASE("request_sizing: the average follows a change of element size", "[client][request_sizing]") {
  RequestSizing sizing(/*max_outstanding=*/1000);
  // The 1024th element halves the sums: 512 elements of 1 MiB remain.
  for (int i = 0; i < 1024; ++i) sizing.Observe(1 << 20);
  CHECK(sizing.ElementsForTargetBytes() == 4);
  // Then 256 KiB elements. After 512 of them the sums are halved again,
  // to 512 elements of 640 KiB on average: 6 to a request.
  for (int i = 0; i < 512; ++i) sizing.Observe(256 << 10);
  CHECK(sizing.ElementsForTargetBytes() == 6);
  // Each 512 more halve the old size's weight: 448 KiB, 9 to a request.
  for (int i = 0; i < 512; ++i) sizing.Observe(256 << 10);
  CHECK(sizing.ElementsForTargetBytes() == 9);
  // 4096 more leave 256.75 KiB on average: 15 to a request.
  for (int i = 0; i < 4096; ++i) sizing.Observe(256 << 10);
  CHECK(sizing.ElementsForTargetBytes() == 15);
}

}  // namespace
}  // namespace sluice
