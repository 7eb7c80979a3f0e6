#include "dispatcher/split_leaser.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/split_provider.h"

namespace sluice::dispatcher {
namespace {

// An iteration as the state holds it before its first lease.
DispatcherState::Iteration Fresh() {
  DispatcherState::Iteration iteration;
  iteration.id = 1;
  return iteration;
}

std::vector<Split> Leased(const proto::Update::LeaseSplits& lease) {
  std::vector<Split> splits;
  for (const auto& message : lease.splits()) splits.push_back(SplitFromMessage(message));
  return splits;
}

class FailingProvider : public SplitProvider {
 public:
  absl::Status GetNext(Split*, bool*) override { return absl::DataLossError("cannot list files"); }
  absl::Status Reset() override { return absl::OkStatus(); }
  std::string Save() const override { return ""; }
  absl::Status Restore(const std::string&) override { return absl::OkStatus(); }
};

TEST_CASE("split_leaser: new splits come as one run, with the provider's cursor", "[dispatcher]") {
  SplitLeaser leaser;
  leaser.Add(1, std::make_unique<IndexSplitProvider>(25, 10));
  CHECK(leaser.Has(1));
  proto::Update::LeaseSplits lease;
  REQUIRE(leaser.Lease(Fresh(), 8, &lease).ok());
  // [0, 10), [10, 20) and [20, 25) as seqs 1 to 3.
  CHECK(Leased(lease) == std::vector<Split>{Split{0, 25, 1, 3, 10}});
  CHECK(lease.cursor() == "3:0");
  CHECK(lease.provider_exhausted());
  CHECK(lease.end_of_splits());
}

TEST_CASE("split_leaser: a lease holds at most max_splits, and the next goes on from the state",
          "[dispatcher]") {
  SplitLeaser leaser;
  leaser.Add(1, std::make_unique<IndexSplitProvider>(25, 10));
  DispatcherState::Iteration iteration = Fresh();
  proto::Update::LeaseSplits first;
  REQUIRE(leaser.Lease(iteration, 2, &first).ok());
  CHECK(Leased(first) == std::vector<Split>{Split{0, 20, 1, 2, 10}});
  CHECK(first.cursor() == "2:0");
  CHECK_FALSE(first.provider_exhausted());
  CHECK_FALSE(first.end_of_splits());
  // As the state is once the first lease is applied.
  iteration.next_split_seq = 3;
  proto::Update::LeaseSplits second;
  REQUIRE(leaser.Lease(iteration, 2, &second).ok());
  CHECK(Leased(second) == std::vector<Split>{Split{20, 25, 3, 1, 0}});
  CHECK(second.provider_exhausted());
  CHECK(second.end_of_splits());
}

TEST_CASE("split_leaser: a restored iteration's skipped splits are never handed out",
          "[dispatcher][checkpoint]") {
  SplitLeaser leaser;
  leaser.Add(1, std::make_unique<IndexSplitProvider>(60, 10));  // seqs 1 to 6
  DispatcherState::Iteration iteration = Fresh();
  iteration.skip_splits = {{1, 3}, {5, 6}};
  proto::Update::LeaseSplits first;
  REQUIRE(leaser.Lease(iteration, 1, &first).ok());
  CHECK(Leased(first) == std::vector<Split>{Split{20, 30, 3}});
  CHECK(first.next_split_seq() == 4);
  CHECK_FALSE(first.end_of_splits());
  iteration.next_split_seq = 4;
  proto::Update::LeaseSplits rest;
  REQUIRE(leaser.Lease(iteration, 8, &rest).ok());
  // 4, then 6 past the skipped 5: two runs, as they are not consecutive.
  CHECK(Leased(rest) == std::vector<Split>{Split{30, 40, 4}, Split{50, 60, 6}});
  CHECK(rest.next_split_seq() == 7);
  CHECK(rest.end_of_splits());
}

TEST_CASE("split_leaser: a lease passes over at most kMaxSkippedPerLease skipped splits",
          "[dispatcher][checkpoint]") {
  SplitLeaser leaser;
  leaser.Add(1, std::make_unique<IndexSplitProvider>(int64_t{1} << 40, 1));
  DispatcherState::Iteration iteration = Fresh();
  iteration.skip_splits = {{1, int64_t{1} << 30}};
  proto::Update::LeaseSplits lease;
  REQUIRE(leaser.Lease(iteration, 8, &lease).ok());
  CHECK(lease.splits().empty());
  CHECK(lease.next_split_seq() == 1 + kMaxSkippedPerLease);
  CHECK_FALSE(lease.end_of_splits());
}

TEST_CASE("split_leaser: returned splits go first, whole or in part", "[dispatcher]") {
  SplitLeaser leaser;
  leaser.Add(1, std::make_unique<IndexSplitProvider>(100, 10));
  DispatcherState::Iteration iteration = Fresh();
  // A lost task's run of seqs 5 and 6.
  iteration.returned_splits[5] = Split{40, 60, 5, 2, 10};
  iteration.next_split_seq = 7;
  proto::Update::LeaseSplits lease;
  SECTION("room for them and one new split") {
    REQUIRE(leaser.Lease(iteration, 3, &lease).ok());
    CHECK(Leased(lease) == std::vector<Split>{Split{40, 60, 5, 2, 10}, Split{0, 10, 7, 1, 0}});
    CHECK_FALSE(lease.end_of_splits());
  }
  SECTION("room for part of them: no new split, the provider untouched") {
    REQUIRE(leaser.Lease(iteration, 1, &lease).ok());
    CHECK(Leased(lease) == std::vector<Split>{Split{40, 50, 5, 1, 0}});
    CHECK(lease.cursor() == "0:0");
    CHECK_FALSE(lease.end_of_splits());
  }
  SECTION("an exhausted provider ends the splits once no returned split is left") {
    iteration.splits_exhausted = true;
    REQUIRE(leaser.Lease(iteration, 1, &lease).ok());
    CHECK(lease.provider_exhausted());
    CHECK_FALSE(lease.end_of_splits());
    proto::Update::LeaseSplits rest;
    REQUIRE(leaser.Lease(iteration, 3, &rest).ok());
    CHECK(Leased(rest) == std::vector<Split>{Split{40, 60, 5, 2, 10}});
    CHECK(rest.end_of_splits());
  }
}

TEST_CASE("split_leaser: an iteration without a provider is NotFound, a provider's error passes through",
          "[dispatcher]") {
  SplitLeaser leaser;
  proto::Update::LeaseSplits lease;
  absl::Status unknown = leaser.Lease(Fresh(), 4, &lease);
  CHECK(absl::IsNotFound(unknown));
  CHECK(unknown.message() == "iteration 1 has no splits");
  leaser.Add(1, std::make_unique<IndexSplitProvider>(10, 10));
  leaser.Forget(1);
  CHECK_FALSE(leaser.Has(1));
  CHECK(absl::IsNotFound(leaser.Lease(Fresh(), 4, &lease)));
  leaser.Add(1, std::make_unique<FailingProvider>());
  absl::Status failed = leaser.Lease(Fresh(), 4, &lease);
  CHECK(absl::IsDataLoss(failed));
  CHECK(failed.message() == "cannot list files");
}

}  // namespace
}  // namespace sluice::dispatcher
