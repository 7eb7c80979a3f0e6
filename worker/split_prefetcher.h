// SplitPrefetcher: the split provider of a distributed_epoch task on a
// worker. A background thread fetches splits from the dispatcher ahead of
// the pipeline, so the pipeline never waits a round trip per batch of
// splits.
//
// How far ahead adapts like TCP's slow start: the first request asks for
// `initial_splits`; every time the pipeline finds the queue empty (it
// outran the fetcher), the request size doubles, up to `max_splits`. A
// request goes out whenever at most one request's worth is queued, so up
// to two requests' worth are held. Slow pipelines thus hold few splits
// (which keeps the end of an epoch balanced across workers), fast ones
// hold enough to cover the round trip. Requests also double until they
// cover `min_fetch_interval` of the pipeline's pace. Splits arrive in runs
// (Split::count); sizes count splits, and GetNext hands out a whole run,
// which a source reads like one split.
#ifndef SLUICE_WORKER_SPLIT_PREFETCHER_H_
#define SLUICE_WORKER_SPLIT_PREFETCHER_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pipeline/dataset.h"

namespace sluice::worker {

class SplitPrefetcher : public SplitProvider {
 public:
  // Fetches at most `max_splits` splits into `splits`; sets `end` once the
  // dispatcher has no more. `cancelled` tells a retrying fetch to give up.
  using FetchFn = std::function<absl::Status(int max_splits, const std::function<bool()>& cancelled,
                                             std::vector<Split>* splits, bool* end)>;

  struct Options {
    int initial_splits = 8;
    // The dispatcher caps it further (splits_per_request).
    int max_splits = 1 << 16;
    // The request size also doubles while it covers less than this much
    // of the pipeline's recent pace: a pipeline paced by its readers never
    // finds the queue empty, yet may take splits fast enough that small
    // requests cost the dispatcher a call every few hundred microseconds.
    absl::Duration min_fetch_interval = absl::Milliseconds(20);
  };

  SplitPrefetcher(FetchFn fetch, Options options);
  // Stops the fetch thread (a fetch in progress finishes or gives up).
  ~SplitPrefetcher() override;

  absl::Status GetNext(Split* split, bool* end_of_splits) override;
  absl::Status Reset() override { return absl::UnimplementedError("the dispatcher owns split positions"); }
  std::string Save() const override { return ""; }
  absl::Status Restore(const std::string&) override {
    return absl::UnimplementedError("the dispatcher owns split positions");
  }

  // Makes GetNext return Cancelled and stops fetching; for a task being
  // deleted while its pipeline waits on splits.
  void Cancel();

 private:
  void FetchLoop();
  bool NeedsFetch() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || queued_splits_ <= request_splits_;
  }
  bool CanTake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || fetch_done_ || cancelled_;
  }

  const FetchFn fetch_;
  const Options options_;

  absl::Mutex mu_;
  // Runs of splits (Split::count), and how many splits they hold.
  std::deque<Split> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_splits_ ABSL_GUARDED_BY(mu_) = 0;
  int request_splits_ ABSL_GUARDED_BY(mu_);
  // The pipeline found the queue empty since the last request went out
  // (waiting for the very first splits does not count).
  bool starved_ ABSL_GUARDED_BY(mu_) = false;
  bool fetched_any_ ABSL_GUARDED_BY(mu_) = false;
  // Splits the pipeline took since the last request went out, and when.
  int64_t taken_since_fetch_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_fetch_ ABSL_GUARDED_BY(mu_);
  // No more fetches: the dispatcher said end of splits, or a fetch failed.
  bool fetch_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fetch_status_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_SPLIT_PREFETCHER_H_
