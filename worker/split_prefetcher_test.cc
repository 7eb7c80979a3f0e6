#include "worker/split_prefetcher.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>

#include "worker/dispatcher_splits.h"

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

// Takes every split until the end or an error, pausing `pause` after each
// 8, as a pipeline paced by its readers would.
std::vector<Split> DrainAll(SplitProvider& provider, absl::Status* status,
                            std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
  std::vector<Split> splits;
  while (true) {
    Split split;
    bool end = false;
    *status = provider.GetNext(&split, &end);
    if (!status->ok() || end) return splits;
    splits.push_back(split);
    if (splits.size() % 8 == 0 && pause.count() > 0) std::this_thread::sleep_for(pause);
  }
}

std::vector<Split> TakePaced(SplitProvider& provider, std::chrono::milliseconds pause) {
  absl::Status status;
  std::vector<Split> splits = DrainAll(provider, &status, pause);
  REQUIRE(status.ok());
  return splits;
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
  // 8 splits per 5 ms or slower, so 8 cover more than 1 ms of its pace.
  SplitPrefetcher prefetcher(
      dispatcher.Fn(),
      {.initial_splits = 8, .max_splits = 1024, .min_fetch_interval = absl::Milliseconds(1)});
  // Wait until the first request is in, so the pipeline never finds the
  // queue empty; then take slowly enough that the fetcher always keeps up.
  while (dispatcher.Requests().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(TakePaced(prefetcher, std::chrono::milliseconds(5)).size() == 200);
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

TEST_CASE("split_prefetcher: requests grow to cover min_fetch_interval of a paced pipeline",
          "[worker][splits]") {
  // The fetches are instant and the pipeline takes 8 splits per
  // millisecond or so, so it never finds the queue empty; only the pace
  // rule (8 splits cover far less than 50 ms) grows the requests.
  FakeDispatcher dispatcher(3000);
  SplitPrefetcher prefetcher(
      dispatcher.Fn(), {.initial_splits = 8, .max_splits = 64, .min_fetch_interval = absl::Milliseconds(50)});
  while (dispatcher.Requests().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::vector<Split> splits = TakePaced(prefetcher, std::chrono::milliseconds(1));
  REQUIRE(splits.size() == 3000);
  for (int i = 0; i < 3000; ++i) CHECK(splits[i] == Split{i * 10, i * 10 + 10});
  const std::vector<int> requests = dispatcher.Requests();
  REQUIRE(requests.size() >= 4);
  CHECK(requests.front() == 8);
  for (size_t i = 1; i < requests.size(); ++i) {
    CHECK((requests[i] == requests[i - 1] || requests[i] == 2 * requests[i - 1]));
  }
  CHECK(requests.back() == 64);
}

TEST_CASE("split_prefetcher: runs of splits count as their splits", "[worker][splits]") {
  // Each request is answered with runs of 4 splits of 10 positions.
  std::vector<int> requests;
  absl::Mutex mu;
  int next_seq = 1;
  SplitPrefetcher prefetcher(
      [&](int max_splits, const std::function<bool()>&, std::vector<Split>* splits, bool* end) {
        absl::MutexLock lock(&mu);
        requests.push_back(max_splits);
        for (int i = 0; i < max_splits; i += 4, next_seq += 4) {
          const int64_t begin = (next_seq - 1) * 10;
          splits->push_back(Split{begin, begin + 40, next_seq, 4, 10});
        }
        *end = false;
        return absl::OkStatus();
      },
      {.initial_splits = 8, .max_splits = 8});
  Split run;
  bool end = false;
  REQUIRE(prefetcher.GetNext(&run, &end).ok());
  CHECK(run == Split{0, 40, 1, 4, 10});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // 8 splits (2 runs) per request: after the first, 8 are queued, so a
  // second goes out (16); one run taken leaves 12, more than 8, so no
  // third. Counting runs instead (3 left, fewer than 8) would fetch on.
  absl::MutexLock lock(&mu);
  CHECK(requests == std::vector<int>{8, 8});
}

TEST_CASE("rerun_skips: each rerun split's taken positions are taken once, and malformed ones name the split",
          "[worker]") {
  RerunSkips skips;
  proto::GetSplitsResponse response;
  proto::SplitDelivery* split = response.add_skip_positions();
  split->set_seq(4);
  for (int64_t n : {0, 5, 8, 9}) split->add_delivered(n);
  REQUIRE(skips.Add(response).ok());
  CHECK(skips.Take(3).empty());
  CHECK(skips.Take(4) == IntRanges{{0, 5}, {8, 9}});
  CHECK(skips.Take(4).empty());
  split->set_seq(6);
  split->add_delivered(2);
  const absl::Status malformed = skips.Add(response);
  CHECK(absl::IsInvalidArgument(malformed));
  CHECK(malformed.message() ==
        "GetSplits: skip_positions of split 6 must hold [begin, end) pairs, not 5 numbers");
}

}  // namespace sluice::worker
