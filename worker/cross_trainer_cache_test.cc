#include "worker/cross_trainer_cache.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/element_cost.h"
#include "sluice/tensor.h"

namespace sluice::worker {
namespace {

// An element of one int64 scalar: 8 bytes of data, kCost in all.
Element Scalar(int64_t value) { return Element::Of(Tensor::Scalar<int64_t>(value)); }
const int64_t kCost = ElementCost(Scalar(0));

int64_t ValueAt(const CrossTrainerCache& cache, int64_t position) {
  return *cache.At(position).components.at(0).data<int64_t>();
}

}  // namespace

TEST_CASE("cross_trainer_cache: keeps the latest max_bytes of the stream, and trainers behind skip to them",
          "[worker][cross_trainer]") {
  CrossTrainerCache cache(/*max_bytes=*/kCost * 4);  // four elements
  absl::StatusOr<CrossTrainerCache::Cursor*> first = cache.Find("trainer-a");
  REQUIRE(first.ok());
  CHECK((*first)->position == 0);
  CHECK_FALSE(cache.HasKept(**first));
  for (int64_t i = 0; i < 6; ++i) cache.Append(Scalar(100 + i));
  // Six sent, the last four kept: positions [2, 6).
  CHECK(cache.begin() == 2);
  CHECK(cache.end() == 6);
  CHECK(cache.bytes() == 4 * kCost);
  CHECK(ValueAt(cache, 2) == 102);
  CHECK(ValueAt(cache, 5) == 105);
  // trainer-a never read: it is 2 behind the oldest kept.
  CHECK(cache.Behind(**first) == 2);
  CHECK(cache.HasKept(**first));
  // A trainer new to the task starts at the oldest element kept.
  absl::StatusOr<CrossTrainerCache::Cursor*> second = cache.Find("trainer-b");
  REQUIRE(second.ok());
  CHECK((*second)->position == 2);
  CHECK(cache.Behind(**second) == 0);
  // The same id finds the same cursor.
  (*second)->position = 5;
  CHECK((*cache.Find("trainer-b"))->position == 5);
}

TEST_CASE("cross_trainer_cache: an element larger than max_bytes is kept by no one",
          "[worker][cross_trainer]") {
  CrossTrainerCache cache(/*max_bytes=*/kCost - 1);
  cache.Append(Scalar(1));
  CHECK(cache.begin() == 1);
  CHECK(cache.end() == 1);
  CHECK(cache.bytes() == 0);
}

TEST_CASE("cross_trainer_cache: elements of no data weigh what they hold, so max_bytes bounds them too",
          "[worker][cross_trainer]") {
  // Issue 50: weighed by their data, empty strings weighed 0 and were never
  // evicted; the worker grew by 2 GB a minute.
  const Element empty = Element::Of(Tensor::StringScalar(""));
  CHECK(empty.ByteSize() == 0);
  const int64_t cost = ElementCost(empty);
  CHECK(cost > static_cast<int64_t>(sizeof(Element) + sizeof(Tensor) + sizeof(std::string)));
  CrossTrainerCache cache(/*max_bytes=*/10 * cost);
  for (int i = 0; i < 100000; ++i) cache.Append(empty);
  CHECK(cache.end() == 100000);
  CHECK(cache.begin() == 100000 - 10);
  CHECK(cache.bytes() == 10 * cost);
  CrossTrainerCache one_byte(/*max_bytes=*/1);
  for (int i = 0; i < 1000; ++i) one_byte.Append(empty);
  CHECK(one_byte.begin() == 1000);
  CHECK(one_byte.bytes() == 0);
}

TEST_CASE("cross_trainer_cache: trainer ids from the network are bounded", "[worker][cross_trainer]") {
  CrossTrainerCache cache(1024);
  CHECK(cache.Find("").status() ==
        absl::InvalidArgumentError(
            "GetElements: a cross-trainer cache task needs a trainer_id of 1 to 128 bytes, got 0"));
  CHECK(cache.Find(std::string(129, 'x')).status() ==
        absl::InvalidArgumentError(
            "GetElements: a cross-trainer cache task needs a trainer_id of 1 to 128 bytes, got 129"));
  CHECK(cache.Find(std::string(128, 'x')).ok());
  for (int i = 1; i < CrossTrainerCache::kMaxTrainers; ++i) REQUIRE(cache.Find("t" + std::to_string(i)).ok());
  CHECK(cache.Find("one-more").status() ==
        absl::ResourceExhaustedError("GetElements: trainer 'one-more' is one too many for this cross-trainer "
                                     "cache task, which already serves 1024 trainers"));
  // Those it knows still find theirs.
  CHECK(cache.Find("t1").ok());
}

}  // namespace sluice::worker
