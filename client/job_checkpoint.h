// Checkpoints of reads from the service (issue 20): the fingerprint a
// pipeline's saved states carry, the merge of the states that the
// consumers of one shared job saved at the same step into one job
// checkpoint, and restoring an iterator from either.
#ifndef SLUICE_CLIENT_JOB_CHECKPOINT_H_
#define SLUICE_CLIENT_JOB_CHECKPOINT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"
#include "sluice/dataset.pb.h"

namespace sluice::internal {

// The definition's fingerprint with each `distribute` step's reader-side
// options cleared (the dispatcher's address, job name, consumer index,
// timeouts, budgets, compression, transport): a restore may read from a
// new dispatcher, or under another name, and still get the same elements.
// Equal to the definition's fingerprint for a local pipeline.
std::string CheckpointFingerprint(const proto::DatasetDef& def);

// Merges saved states, each named (a file, "state 2") for the errors,
// into one job checkpoint: every split any of them delivered, and each
// one's local steps. They must come from one pipeline and read a service
// job; job checkpoints merge too.
absl::StatusOr<std::string> MergeNamedStates(const std::vector<std::pair<std::string, std::string>>& states);

// A restored pipeline iterator, and the elements to give before the
// pipeline's (client/replay_iterator.h).
struct RestoredIterator {
  std::unique_ptr<IteratorBase> iterator;
  std::vector<Element> replay;
};
absl::StatusOr<RestoredIterator> RestoreParts(const DatasetBase& dataset, const std::string& fingerprint,
                                              const std::string& bytes, const RestoreOptions& options);

// A fresh iterator of `dataset`, restored from a consumer's saved state or
// a job checkpoint (as consumer `options.consumer_index` of
// `options.num_consumers`).
absl::StatusOr<std::unique_ptr<IteratorBase>> RestoreIterator(const DatasetBase& dataset,
                                                              const std::string& fingerprint,
                                                              const std::string& bytes,
                                                              const RestoreOptions& options);

// `iterator`'s state with `ahead` (elements taken from it but not handed
// on) in front, which a restore gives first.
absl::StatusOr<std::string> SaveWithReadAhead(IteratorBase& iterator, const std::string& fingerprint,
                                              const std::vector<Element>& ahead);

}  // namespace sluice::internal

#endif  // SLUICE_CLIENT_JOB_CHECKPOINT_H_
