// Where a distributed_epoch task's splits come from: GetSplits on the
// dispatcher, numbered so that a retry gets the same answer. A split run
// again after a shared exactly_once read lost its task comes with the
// positions its consumers already took (RerunSkips), which the task does
// not serve again (docs/design.md, "Shared exactly_once reads after a lost
// worker").
//
//   auto skips = std::make_shared<RerunSkips>();
//   SplitPrefetcher prefetcher(FetchSplitsFrom(dispatcher, iteration, task, skips), {});
//   IntRanges skip = skips->Take(split.seq);  // before running the split
#ifndef SLUICE_WORKER_DISPATCHER_SPLITS_H_
#define SLUICE_WORKER_DISPATCHER_SPLITS_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "service/dispatcher_client.h"
#include "service/int_ranges.h"
#include "sluice/proto/service.pb.h"
#include "worker/split_prefetcher.h"

namespace sluice::worker {

// Positions of rerun splits not to serve again, by split seq. The fetch
// thread adds; the pipeline thread takes each split's before running it.
class RerunSkips {
 public:
  // InvalidArgument naming the split when the dispatcher's pairs are
  // malformed.
  absl::Status Add(const proto::GetSplitsResponse& response);
  // The positions of split `seq` not to serve (none: empty), forgotten.
  IntRanges Take(int64_t seq);

 private:
  absl::Mutex mu_;
  std::map<int64_t, IntRanges> skips_ ABSL_GUARDED_BY(mu_);
};

// Fetches task `task_id`'s splits from the dispatcher; `skips` gets the
// positions of rerun splits not to serve again.
SplitPrefetcher::FetchFn FetchSplitsFrom(DispatcherClient* dispatcher, int64_t iteration_id, int64_t task_id,
                                         std::shared_ptr<RerunSkips> skips);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_DISPATCHER_SPLITS_H_
