#include "worker/split_prefetcher.h"

#include <algorithm>

namespace sluice::worker {

SplitPrefetcher::SplitPrefetcher(FetchFn fetch, Options options)
    : fetch_(std::move(fetch)),
      options_(options),
      request_splits_(std::clamp(options.initial_splits, 1, std::max(1, options.max_splits))) {
  thread_ = std::thread([this] { FetchLoop(); });
}

SplitPrefetcher::~SplitPrefetcher() {
  Cancel();
  thread_.join();
}

void SplitPrefetcher::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

void SplitPrefetcher::FetchLoop() {
  const std::function<bool()> cancelled = [this] {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  };
  while (true) {
    int request;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &SplitPrefetcher::NeedsFetch));
      if (cancelled_) return;
      const absl::Time now = absl::Now();
      // Splits the pipeline would take in min_fetch_interval at its pace
      // since the last request.
      const double elapsed = absl::ToDoubleSeconds(now - last_fetch_);
      const bool too_frequent =
          fetched_any_ && taken_since_fetch_ > 0 &&
          static_cast<double>(taken_since_fetch_) * absl::ToDoubleSeconds(options_.min_fetch_interval) >
              static_cast<double>(request_splits_) * elapsed;
      if (starved_ || too_frequent) {
        request_splits_ = std::min(request_splits_ * 2, std::max(1, options_.max_splits));
      }
      starved_ = false;
      taken_since_fetch_ = 0;
      last_fetch_ = now;
      request = request_splits_;
    }
    std::vector<Split> splits;
    bool end = false;
    absl::Status status = fetch_(request, cancelled, &splits, &end);
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      fetch_status_ = status;
      fetch_done_ = true;
      return;
    }
    for (const Split& run : splits) queued_splits_ += run.count;
    queue_.insert(queue_.end(), splits.begin(), splits.end());
    fetched_any_ = true;
    if (end) {
      fetch_done_ = true;
      return;
    }
  }
}

absl::Status SplitPrefetcher::GetNext(Split* split, bool* end_of_splits) {
  absl::MutexLock lock(&mu_);
  if (queue_.empty() && !fetch_done_ && fetched_any_) starved_ = true;
  mu_.Await(absl::Condition(this, &SplitPrefetcher::CanTake));
  if (cancelled_) return absl::CancelledError("task cancelled");
  if (queue_.empty()) {
    // Splits fetched before a failure are used first; then the failure.
    if (!fetch_status_.ok()) return fetch_status_;
    *end_of_splits = true;
    return absl::OkStatus();
  }
  *split = queue_.front();
  queue_.pop_front();
  queued_splits_ -= split->count;
  taken_since_fetch_ += split->count;
  *end_of_splits = false;
  return absl::OkStatus();
}

}  // namespace sluice::worker
