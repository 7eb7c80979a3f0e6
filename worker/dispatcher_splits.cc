#include "worker/dispatcher_splits.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/split_provider.h"
#include "worker/worker_task.h"

namespace sluice::worker {

absl::Status RerunSkips::Add(const proto::GetSplitsResponse& response) {
  if (response.skip_positions().empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  for (const proto::SplitDelivery& split : response.skip_positions()) {
    absl::StatusOr<IntRanges> ranges = RangesFromPairs(
        split.delivered(), 0, absl::StrCat("GetSplits: skip_positions of split ", split.seq()));
    if (!ranges.ok()) return ranges.status();
    skips_[split.seq()] = *std::move(ranges);
  }
  return absl::OkStatus();
}

IntRanges RerunSkips::Take(int64_t seq) {
  absl::MutexLock lock(&mu_);
  auto found = skips_.find(seq);
  if (found == skips_.end()) return {};
  IntRanges skip = std::move(found->second);
  skips_.erase(found);
  return skip;
}

SplitPrefetcher::FetchFn FetchSplitsFrom(DispatcherClient* dispatcher, int64_t iteration_id, int64_t task_id,
                                         std::shared_ptr<RerunSkips> skips) {
  // Numbers the requests, so that the dispatcher answers a retry with the
  // splits it leased the first time. One fetch thread calls this.
  auto last_request = std::make_shared<int64_t>(0);
  return [=](int max_splits, const std::function<bool()>& cancelled, std::vector<Split>* splits, bool* end) {
    proto::GetSplitsRequest request;
    request.set_iteration_id(iteration_id);
    request.set_task_id(task_id);
    request.set_max_splits(max_splits);
    request.set_request_id(++*last_request);
    proto::GetSplitsResponse response;
    absl::Status status =
        dispatcher->GetSplits(request, &response, {.retry_for = kDispatcherRetryFor, .cancelled = cancelled});
    if (!status.ok()) return status;
    // Before the splits: the pipeline thread looks a split's up when it
    // runs it.
    if (absl::Status s = skips->Add(response); !s.ok()) return s;
    for (const auto& s : response.splits()) splits->push_back(SplitFromMessage(s));
    *end = response.end_of_splits();
    return absl::OkStatus();
  };
}

}  // namespace sluice::worker
