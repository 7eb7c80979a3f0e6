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
      if (starved_) request_splits_ = std::min(request_splits_ * 2, std::max(1, options_.max_splits));
      starved_ = false;
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
  *end_of_splits = false;
  return absl::OkStatus();
}

}  // namespace sluice::worker
