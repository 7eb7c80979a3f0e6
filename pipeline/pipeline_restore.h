// Restoring a pipeline's iterator from a saved state (Iterator::Save) or a
// job checkpoint (MergeSavedStates, sluice/iterator.h), and saving with
// elements read ahead in front: what the SDK's iterators, the distributed
// iterator and the CLI use, on the engine's types. The fingerprint that
// saved states carry is the definition's with each `distribute` step's
// reader-side options cleared.
#ifndef SLUICE_PIPELINE_PIPELINE_RESTORE_H_
#define SLUICE_PIPELINE_PIPELINE_RESTORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/dataset.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

// The definition's fingerprint with each `distribute` step's reader-side
// options cleared (the dispatcher's address, job name, consumer index,
// timeouts, budgets, compression, transport): a restore may read from a
// new dispatcher, or under another name, and still get the same elements.
// Equal to the definition's fingerprint for a local pipeline.
std::string CheckpointFingerprint(const proto::DatasetDef& def);

// Which of how many consumers a restore resumes a job checkpoint as (one
// consumer's own saved state restores as consumer 0 of 1).
struct RestoreAs {
  int64_t num_consumers = 1;
  int64_t consumer_index = 0;
};

// A restored pipeline iterator, and the elements to give before the
// pipeline's (pipeline/replay_iterator.h).
struct RestoredIterator {
  std::unique_ptr<IteratorBase> iterator;
  std::vector<Element> replay;
};
absl::StatusOr<RestoredIterator> RestoreParts(const DatasetBase& dataset, const std::string& fingerprint,
                                              const std::string& bytes, const RestoreAs& options);

// A fresh iterator of `dataset`, restored from a consumer's saved state or
// a job checkpoint.
absl::StatusOr<std::unique_ptr<IteratorBase>> RestoreIterator(const DatasetBase& dataset,
                                                              const std::string& fingerprint,
                                                              const std::string& bytes,
                                                              const RestoreAs& options);

// `iterator`'s state with `ahead` (elements taken from it but not handed
// on) in front, which a restore gives first.
absl::StatusOr<std::string> SaveWithReadAhead(IteratorBase& iterator, const std::string& fingerprint,
                                              const std::vector<Element>& ahead);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_PIPELINE_RESTORE_H_
