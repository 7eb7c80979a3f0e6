// Split providers for distributed_epoch mode.
//
// A source's positions (elements, or files) are cut into splits of
// `positions_per_split`; a RepeatSplitProvider replays its input `count`
// times (forever for -1), which is how a `repeat` after the source reaches
// the dispatcher. MakeSplitProvider derives the provider for a whole
// pipeline, or says why the pipeline cannot be split.
#ifndef SLUICE_PIPELINE_SPLIT_PROVIDER_H_
#define SLUICE_PIPELINE_SPLIT_PROVIDER_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "pipeline/builder.h"  // SourceSplitInfo
#include "pipeline/dataset.h"
#include "pipeline/split_run.h"  // run arithmetic, for users of this header
#include "sluice/proto/dataset.pb.h"

namespace sluice {

// Splits [0, n) into consecutive ranges of at most `positions_per_split`.
// With a seed, whole splits come in a seeded random order that changes
// with each Reset (for list_files with shuffle).
class IndexSplitProvider : public SplitProvider {
 public:
  IndexSplitProvider(int64_t num_positions, int64_t positions_per_split,
                     std::optional<uint64_t> shuffle_seed = std::nullopt);
  absl::Status GetNext(Split* split, bool* end_of_splits) override;
  absl::Status Reset() override;
  std::string Save() const override;
  absl::Status Restore(const std::string& state) override;

 private:
  void MakeOrder();

  const int64_t num_positions_;
  const int64_t positions_per_split_;
  const std::optional<uint64_t> shuffle_seed_;
  int64_t next_split_ = 0;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;  // split order when shuffled
};

class RepeatSplitProvider : public SplitProvider {
 public:
  RepeatSplitProvider(std::unique_ptr<SplitProvider> input, int64_t count);
  absl::Status GetNext(Split* split, bool* end_of_splits) override;
  absl::Status Reset() override;
  std::string Save() const override;
  absl::Status Restore(const std::string& state) override;

 private:
  std::unique_ptr<SplitProvider> input_;
  const int64_t count_;
  int64_t repetition_ = 0;
  bool repetition_empty_ = true;  // no split yet in this repetition
};

struct SplitOptions {
  // Elements per split for `range` and `from_tensor_slices`. File sources
  // use one file per split, unless batch-aligned.
  int64_t elements_per_split = 64;
  // An exactly_once job's splits: with a `batch` (or `padded_batch`) of
  // size B on the worker side, a file source's splits are B files and an
  // element source's max(B, elements_per_split rounded down to a multiple
  // of B), so that a worker running its pipeline once per split makes
  // whole batches (docs/design.md, "Exactly once over real pipelines").
  bool batch_aligned = false;
  // With batch_aligned: the repetition whose split order (of a shuffled
  // file source) to give, so that each epoch comes in its own.
  int64_t repetition = 0;
};

// How many source positions each split of `def` covers under `options`.
int64_t PositionsPerSplit(const proto::DatasetDef& def, bool per_file, const SplitOptions& options);

// Why a step after the source keeps the pipeline from being split: one whose
// output over the whole input is not its outputs over the parts that the
// workers read (concatenate's sub-pipeline would be read whole by every
// worker; unique would drop repeats only within one worker's elements; scan
// would start its state again on each worker).
// "" when no step does.
std::string UnsplittableStep(const proto::DatasetDef& def);

// The provider for a pipeline's source, or FailedPrecondition naming the
// step that prevents splitting (for example `zip`, `from_tensors` or a
// `concatenate`).
absl::StatusOr<std::unique_ptr<SplitProvider>> MakeSplitProvider(const proto::DatasetDef& def,
                                                                 const SplitOptions& options = {});
// The same from the source as DescribeSourceSplits listed it (a caller
// that keeps the listing lists once).
std::unique_ptr<SplitProvider> MakeSplitProvider(const proto::DatasetDef& def, const SplitOptions& options,
                                                 const SourceSplitInfo& info);

// Yields a source's positions in order: all of [0, count), or only those of
// the splits an outside provider hands out.
class SourcePositions {
 public:
  SourcePositions(int64_t count, SplitProvider* provider) : count_(count), provider_(provider) {
    if (provider_ == nullptr) limit_ = count_;
  }
  absl::Status Next(int64_t* position, bool* end);
  // The next run of consecutive positions, at most `max` long.
  absl::Status NextRun(int64_t max, int64_t* begin, int64_t* count, bool* end);
  // The positions Next() will hand out before it asks the provider for
  // another split: [first, second). Sources read ahead within them.
  std::pair<int64_t, int64_t> KnownAhead() const { return {next_, limit_}; }
  // The next position, in a local pipeline; under a split provider the
  // dispatcher's splits are the position, which a service job's checkpoint
  // keeps (not yet: CannotSave).
  absl::Status Save(proto::IteratorState* state) const;
  absl::Status Restore(const proto::IteratorState& state);

 private:
  const int64_t count_;
  SplitProvider* const provider_;
  int64_t next_ = 0;
  int64_t limit_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_SPLIT_PROVIDER_H_
