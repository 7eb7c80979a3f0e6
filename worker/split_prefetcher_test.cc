#include "worker/split_prefetcher.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>

namespace sluice::worker {
namespace {

// A dispatcher stand-in: hands out splits [10k, 10k+10) for k = 0..total-1
// and records each request's size.
struct FakeDispatcher {
  explicit FakeDispatcher(int total) : total(total) {}

  SplitPrefetcher::FetchFn Fn() {
    return [this](int max_splits, const std::function<bool()>&, std::vector<Split>* splits, bool* end) {
      absl::MutexLock lock(&mu);
      requests.push_back(max_splits);
      for (int i = 0; i < max_splits && next < total; ++i, ++next)
        splits->push_back({next * 10, next * 10 + 10});
      *end = next >= total;
      return absl::OkStatus();
    };
  }
  std::vector<int> Requests() {
    absl::MutexLock lock(&mu);
    return requests;
  }

  const int total;
  absl::Mutex mu;
  int next ABSL_GUARDED_BY(mu) = 0;
  std::vector<int> requests ABSL_GUARDED_BY(mu);
};

std::vector<Split> DrainAll(SplitProvider& provider, absl::Status* status) {
  std::vector<Split> splits;
  while (true) {
    Split split;
    bool end = false;
    *status = provider.GetNext(&split, &end);
    if (!status->ok() || end) return splits;
    splits.push_back(split);
  }
}

}  // namespace

TEST_CASE("split_prefetcher: every split arrives once, in order, then end", "[worker][splits]") {
  FakeDispatcher dispatcher(1000);
  SplitPrefetcher prefetcher(dispatcher.Fn(), {.initial_splits = 8, .max_splits = 64});
  absl::Status status;
  std::vector<Split> splits = DrainAll(prefetcher, &status);
  REQUIRE(status.ok());
  REQUIRE(splits.size() == 1000);
  for (int i = 0; i < 1000; ++i) CHECK(splits[i] == Split{i * 10, i * 10 + 10});
  // End is sticky.
  Split split;
  bool end = false;
  CHECK(prefetcher.GetNext(&split, &end).ok());
  CHECK(end);
  // Requests never exceed the maximum, and together ask for every split.
  for (int request : dispatcher.Requests()) CHECK(request <= 64);
}

TEST_CASE("split_prefetcher: requests double while the pipeline outruns them", "[worker][splits]") {
  // Each fetch takes 2 ms and the pipeline takes nothing, so the pipeline
  // finds the queue empty during nearly every fetch. (The one race: a
  // request may go out before the pipeline has drained the last one, and
  // then keeps its size.)
  std::atomic<int> fetches = 0;
  std::vector<int> sizes;
  absl::Mutex mu;
  SplitPrefetcher prefetcher(
      [&](int max_splits, const std::function<bool()>&, std::vector<Split>* splits, bool* end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        {
          absl::MutexLock lock(&mu);
          sizes.push_back(max_splits);
        }
        for (int i = 0; i < max_splits; ++i) splits->push_back({0, 1});
        *end = ++fetches == 16;
        return absl::OkStatus();
      },
      {.initial_splits = 4, .max_splits = 64});
  absl::Status status;
  std::vector<Split> splits = DrainAll(prefetcher, &status);
  REQUIRE(status.ok());
  absl::MutexLock lock(&mu);
  REQUIRE(sizes.size() == 16);
  CHECK(sizes.front() == 4);  // waiting for the first splits is not outrunning
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    total += sizes[i];
    if (i > 0) CHECK((sizes[i] == sizes[i - 1] || sizes[i] == 2 * sizes[i - 1]));
  }
  CHECK(sizes.back() == 64);  // 4 -> 64 is four doublings in 16 fetches
  CHECK(static_cast<int64_t>(splits.size()) == total);
}

TEST_CASE("split_prefetcher: a slow pipeline keeps requests small", "[worker][splits]") {
  FakeDispatcher dispatcher(200);
  SplitPrefetcher prefetcher(dispatcher.Fn(), {.initial_splits = 8, .max_splits = 1024});
  // Wait until the first request is in, so the pipeline never finds the
  // queue empty; then take slowly enough that the fetcher always keeps up.
  while (dispatcher.Requests().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int taken = 0;
  while (true) {
    Split split;
    bool end = false;
    REQUIRE(prefetcher.GetNext(&split, &end).ok());
    if (end) break;
    ++taken;
    if (taken % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(taken == 200);
  for (int request : dispatcher.Requests()) CHECK(request == 8);
  // The queue never held more than two requests' worth: the fetcher waits.
  CHECK(dispatcher.Requests().size() == 25);
}

TEST_CASE("split_prefetcher: holds at most two requests' worth ahead", "[worker][splits]") {
  FakeDispatcher dispatcher(100000);
  SplitPrefetcher prefetcher(dispatcher.Fn(), {.initial_splits = 8, .max_splits = 8});
  Split split;
  bool end = false;
  REQUIRE(prefetcher.GetNext(&split, &end).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // One split taken; the fetcher refills while at most 8 are queued, so it
  // stops once 9 or more are held: at most 16 + 1 handed out.
  const auto requests = dispatcher.Requests();
  CHECK(requests.size() >= 2);
  CHECK(requests.size() <= 3);
}

TEST_CASE("split_prefetcher: a failed fetch comes after the splits before it", "[worker][splits]") {
  int calls = 0;
  SplitPrefetcher prefetcher(
      [&](int, const std::function<bool()>&, std::vector<Split>* splits, bool*) {
        if (++calls == 1) {
          splits->push_back({0, 5});
          return absl::OkStatus();
        }
        return absl::UnavailableError("GetSplits: dispatcher at 127.0.0.1:1 unreachable");
      },
      {});
  absl::Status status;
  std::vector<Split> splits = DrainAll(prefetcher, &status);
  CHECK(splits == std::vector<Split>{{0, 5}});
  CHECK(status == absl::UnavailableError("GetSplits: dispatcher at 127.0.0.1:1 unreachable"));
}

TEST_CASE("split_prefetcher: Cancel wakes a pipeline waiting on splits", "[worker][splits]") {
  std::atomic<bool> fetch_cancelled = false;
  auto prefetcher = std::make_unique<SplitPrefetcher>(
      [&](int, const std::function<bool()>& cancelled, std::vector<Split>*, bool*) {
        // A fetch retrying against a dispatcher that is down.
        while (!cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        fetch_cancelled = true;
        return absl::CancelledError("GetSplits: cancelled");
      },
      SplitPrefetcher::Options{});
  absl::Status status;
  std::thread pipeline([&] {
    Split split;
    bool end = false;
    status = prefetcher->GetNext(&split, &end);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto before = std::chrono::steady_clock::now();
  prefetcher->Cancel();
  pipeline.join();
  prefetcher.reset();  // joins the fetch thread
  CHECK(std::chrono::steady_clock::now() - before < std::chrono::seconds(2));
  CHECK(status == absl::CancelledError("task cancelled"));
  CHECK(fetch_cancelled);
}

}  // namespace sluice::worker
