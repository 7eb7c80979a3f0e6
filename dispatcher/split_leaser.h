// SplitLeaser: the split providers of the distributed_epoch iterations, and
// the leases cut from them.
//
// A worker's GetSplits is answered with a lease: first the splits that lost
// tasks returned to the iteration (DispatcherState::Iteration::
// returned_splits), then new ones from the iteration's provider, with
// consecutive splits joined into runs so that thousands cost what one does.
// The lease is a LeaseSplits update, carrying the provider's cursor after
// it, for DispatcherCore to apply and journal; the state then records what
// each task holds, and a restart restores the provider from the cursor.
//
// Not thread-safe: the dispatcher calls it under DispatcherCore's mutex.
//
//   SplitLeaser leaser;
//   leaser.Add(iteration.id, *MakeSplitProvider(def));
//   proto::Update update;
//   update.mutable_lease_splits()->set_task_id(task_id);
//   if (absl::Status s = leaser.Lease(iteration, 8, update.mutable_lease_splits()); !s.ok()) ...
//   Apply(update);
#ifndef SLUICE_DISPATCHER_SPLIT_LEASER_H_
#define SLUICE_DISPATCHER_SPLIT_LEASER_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/status/status.h"
#include "dispatcher/dispatcher_state.h"
#include "pipeline/dataset.h"
#include "sluice/proto/journal.pb.h"

namespace sluice::dispatcher {

// The most skipped splits (a restored read's delivered ones) one lease
// passes over.
inline constexpr int64_t kMaxSkippedPerLease = int64_t{1} << 16;

class SplitLeaser {
 public:
  // Gives an iteration its provider: when the iteration is made, or at
  // recovery, restored to the iteration's split_cursor. Replaces any
  // provider the id had.
  void Add(int64_t iteration_id, std::unique_ptr<SplitProvider> provider);
  // Drops the provider of an iteration that reads no more splits
  // (collected, failed or removed).
  void Forget(int64_t iteration_id);
  // Whether the iteration has a provider.
  bool Has(int64_t iteration_id) const { return providers_.contains(iteration_id); }

  // Fills the splits, cursor, provider_exhausted and end_of_splits of
  // `lease` with up to `max_splits` (at least 1) splits for `iteration`:
  // its returned splits first, then new ones numbered from its
  // next_split_seq. The caller sets the task and request ids. The provider
  // moves on at once, so the lease must be applied. NotFound if the
  // iteration has no provider; a provider's error as it is.
  absl::Status Lease(const DispatcherState::Iteration& iteration, int64_t max_splits,
                     proto::Update::LeaseSplits* lease);

 private:
  std::map<int64_t, std::unique_ptr<SplitProvider>> providers_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_SPLIT_LEASER_H_
