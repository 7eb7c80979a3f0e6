#include "dispatcher/split_leaser.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/split_provider.h"

namespace sluice::dispatcher {

void SplitLeaser::Add(int64_t iteration_id, std::unique_ptr<SplitProvider> provider) {
  providers_[iteration_id] = std::move(provider);
}

void SplitLeaser::Forget(int64_t iteration_id) { providers_.erase(iteration_id); }

absl::Status SplitLeaser::Lease(const DispatcherState::Iteration& iteration, int64_t max_splits,
                                proto::Update::LeaseSplits* lease) {
  auto provider = providers_.find(iteration.id);
  if (provider == providers_.end()) {
    return absl::NotFoundError(absl::StrCat("iteration ", iteration.id, " has no splits"));
  }
  // Splits of lost tasks first, then new ones, consecutive splits joined
  // into runs.
  int64_t room = max_splits;
  bool returned_left = false;
  for (const auto& [seq, run] : iteration.returned_splits) {
    if (room == 0) {
      returned_left = true;
      break;
    }
    const int64_t taken = std::min(room, run.count);
    SplitToMessage(SplitRunPart(run, 0, taken), lease->add_splits());
    returned_left = taken < run.count;
    room -= taken;
  }
  bool exhausted = iteration.splits_exhausted;
  int64_t next_seq = iteration.next_split_seq;
  std::optional<Split> run;
  // Skipped splits cost a provider step each; a lease passes over at most
  // kMaxSkippedPerLease of them, so that a request holds the lock briefly
  // whatever the skip list, and the next lease goes on.
  int64_t skipped = 0;
  while (!exhausted && room > 0 && skipped < kMaxSkippedPerLease) {
    Split split;
    if (absl::Status s = provider->second->GetNext(&split, &exhausted); !s.ok()) return s;
    if (exhausted) break;
    split.seq = next_seq++;
    // A restored read's delivered splits go by unseen.
    if (InRanges(iteration.skip_splits, split.seq)) {
      ++skipped;
      continue;
    }
    --room;
    if (run.has_value() && ExtendSplitRun(&*run, split)) continue;
    if (run.has_value()) SplitToMessage(*run, lease->add_splits());
    run = split;
  }
  if (run.has_value()) SplitToMessage(*run, lease->add_splits());
  lease->set_cursor(provider->second->Save());
  lease->set_next_split_seq(next_seq);
  lease->set_provider_exhausted(exhausted);
  lease->set_end_of_splits(exhausted && !returned_left);
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
