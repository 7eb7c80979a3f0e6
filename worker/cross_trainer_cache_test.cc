#include "worker/cross_trainer_cache.h"

#include <catch2/catch.hpp>
#include <string>

#include "sluice/tensor.h"

namespace sluice::worker {
namespace {

// An element of one int64 scalar: 8 bytes.
Element Scalar(int64_t value) { return Element::Of(Tensor::Scalar<int64_t>(value)); }

int64_t ValueAt(const CrossTrainerCache& cache, int64_t position) {
  return *cache.At(position).components.at(0).data<int64_t>();
}

}  // namespace

TEST_CASE("cross_trainer_cache: keeps the latest max_bytes of the stream, and trainers behind skip to them",
          "[worker][cross_trainer]") {
  CrossTrainerCache cache(/*max_bytes=*/8 * 4);  // four elements
  absl::StatusOr<CrossTrainerCache::Cursor*> first = cache.Find("trainer-a");
  REQUIRE(first.ok());
  CHECK((*first)->position == 0);
  CHECK_FALSE(cache.HasKept(**first));
  for (int64_t i = 0; i < 6; ++i) cache.Append(Scalar(100 + i));
  // Six sent, the last four kept: positions [2, 6).
  CHECK(cache.begin() == 2);
  CHECK(cache.end() == 6);
  CHECK(cache.bytes() == 32);
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
  CrossTrainerCache cache(/*max_bytes=*/4);
  cache.Append(Scalar(1));
  CHECK(cache.begin() == 1);
  CHECK(cache.end() == 1);
  CHECK(cache.bytes() == 0);
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
