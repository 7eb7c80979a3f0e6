#include "client/read/request_sizing.h"

#include <catch2/catch.hpp>

#include "client/read/read_state.h"

namespace sluice::reader {
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

TEST_CASE("request_sizing: small elements are capped by the share, the room and 1024",
          "[client][request_sizing]") {
  RequestSizing sizing(/*max_outstanding=*/4000);
  sizing.Observe(100);
  CHECK(sizing.AverageBytes() == 100);
  CHECK(sizing.ElementsForTargetBytes() == 41943);
  CHECK(sizing.ElementsToAsk(4000) == 1024);  // kMaxElementsPerRequest
  CHECK(sizing.ElementsToAsk(20) == 20);      // the room
  CHECK(sizing.request_share() == 2000);
  // A budget that grows or shrinks moves the share with it.
  sizing.SetBudget(8192);
  CHECK(sizing.request_share() == 4096);
  CHECK(sizing.min_request() == 2048);
  sizing.SetBudget(64);
  CHECK(sizing.ElementsToAsk(64) == 32);

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

TEST_CASE("read_state: a budget left to the reader follows the elements' size", "[client][request_sizing]") {
  ReadState adaptive(/*max_outstanding_in=*/0, /*sole_reader=*/true, std::nullopt);
  ReadState fixed(/*max_outstanding_in=*/100, /*sole_reader=*/true, std::nullopt);
  absl::MutexLock a(&adaptive.mu);
  absl::MutexLock f(&fixed.mu);
  CHECK(adaptive.max_outstanding == kDefaultMaxOutstanding);
  CHECK(fixed.max_outstanding == 100);
  adaptive.AdaptBudget(64);  // 64-byte elements: the cap
  fixed.AdaptBudget(64);
  CHECK(adaptive.max_outstanding == kMaxAdaptiveOutstanding);
  CHECK(fixed.max_outstanding == 100);  // a budget given is kept
  adaptive.AdaptBudget(16 << 10);       // 16 KiB: 64 MiB of them
  CHECK(adaptive.max_outstanding == 4096);
  adaptive.AdaptBudget(1 << 20);  // 1 MiB and more: the budget of 64 stays
  CHECK(adaptive.max_outstanding == 64);
  adaptive.AdaptBudget(8 << 20);
  CHECK(adaptive.max_outstanding == 64);
  // Memory stays bounded: elements buffered and requested times their size.
  for (int64_t bytes : {1, 64, 2048, 65536, 1 << 20}) {
    adaptive.AdaptBudget(bytes);
    CHECK(adaptive.max_outstanding * bytes <= std::max<int64_t>(kAdaptiveBudgetBytes, 64 * bytes));
  }
}

}  // namespace
}  // namespace sluice::reader
