// The pipeline engine's runtime: datasets, iterators and source splits.
//
// A DatasetBase is an immutable node built from one step of a DatasetDef
// (see builder.h); it knows its element spec and cardinality and makes
// iterators. Iterators are single-threaded from the caller's side: one
// thread calls GetNext at a time, though an op may run work on its own
// threads behind it (parallel map, prefetch).
//
//   absl::StatusOr<DatasetPtr> dataset = BuildDataset(def);
//   auto iterator = (*dataset)->MakeIterator(IteratorContext{});
//   Element element;
//   bool end = false;
//   while ((*iterator)->GetNext(&element, &end).ok() && !end) Use(element);
//
// In distributed_epoch mode the pipeline's source does not walk its whole
// input; it reads the splits that an outside SplitProvider hands it (the
// dispatcher's, through the worker). IteratorContext carries that provider.
#ifndef SLUICE_PIPELINE_DATASET_H_
#define SLUICE_PIPELINE_DATASET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/cardinality.h"  // kInfiniteCardinality, kUnknownCardinality (tf.data's)
#include "sluice/element.h"

namespace sluice {

namespace proto {
class IteratorState;
}  // namespace proto

// A half-open range of source positions: element indices for `range` and
// `from_tensor_slices`, file indices for the file sources.
// The seq of an iteration's first split (0 means "none" in the journal);
// a deterministic reader's order starts there.
inline constexpr int64_t kFirstSplitSeq = 1;

struct Split {
  int64_t begin = 0;
  int64_t end = 0;
  // The split's number in its iteration, when the dispatcher handed it out.
  int64_t seq = 0;
  // A run of the dispatcher's splits (count > 1): seqs [seq, seq + count),
  // split k covering [begin + k * split_size, min(begin + (k + 1) *
  // split_size, end)). The dispatcher leases, journals and sends
  // consecutive splits as one run, so that thousands cost what one does; a
  // source reads a run's positions like one split's. For a single split
  // split_size is 0.
  int64_t count = 1;
  int64_t split_size = 0;
  bool operator==(const Split& other) const = default;
};

// Hands out the splits of one source, in order. Not thread-safe: the
// dispatcher and the worker each serialize access.
class SplitProvider {
 public:
  virtual ~SplitProvider() = default;
  // The next split, or *end_of_splits = true when there are no more.
  virtual absl::Status GetNext(Split* split, bool* end_of_splits) = 0;
  // Starts again from the first split.
  virtual absl::Status Reset() = 0;
  // The position, as opaque bytes that Restore accepts.
  virtual std::string Save() const = 0;
  virtual absl::Status Restore(const std::string& state) = 0;
};

// A job checkpoint that the first `distribute` iterator of a pipeline
// resumes from (issue 20): what the consumers of one step delivered, and
// how many consumers resume it together.
struct ServiceResume {
  std::string state;  // a serialized proto::ServiceReadState
  int64_t num_consumers = 1;
  // Taken by the first iterator; a later one (the next epoch under
  // `repeat`) starts afresh.
  std::atomic<bool> taken{false};
};

struct IteratorContext {
  // When set, the pipeline's source yields only the splits this provider
  // hands out. Not owned; must outlive the iterator.
  SplitProvider* split_provider = nullptr;
  // Restore follows before the first GetNext: a `distribute` iterator
  // waits for it before it starts its job.
  bool restoring = false;
  std::shared_ptr<ServiceResume> service_resume;
  // Under an exactly_once task's batch-aligned splits (SplitOptions::
  // batch_aligned): a shuffled file source's positions index its seeded
  // order, so that a split of B files is B files of that order rather than
  // B neighbours of the sorted list (a batch of one class).
  bool split_positions_in_seeded_order = false;
  // Which repetition of the job that order is for.
  int64_t split_order_epoch = 0;
};

class IteratorBase {
 public:
  virtual ~IteratorBase() = default;
  // The next element, or *end_of_sequence = true once the input is done,
  // after which later calls keep returning end. An error belongs to that
  // call: as in tf.data, a map or filter whose function failed on one
  // element goes on with the next, while a source that failed to read (a
  // corrupt record) reports the error again or ends.
  virtual absl::Status GetNext(Element* element, bool* end_of_sequence) = 0;

  // Up to `max_rows` next elements at once, stacked along a new first
  // dimension, for sources that can produce rows in bulk far more cheaply
  // than one at a time (batch uses it). *rows is how many; 0 with
  // *end_of_sequence at the end. Iterators without a bulk path return
  // Unimplemented and have consumed nothing.
  virtual absl::Status GetNextBatch(int64_t max_rows, Element* batch, int64_t* rows, bool* end_of_sequence) {
    return absl::UnimplementedError("no bulk path");
  }

  // Writes where this iterator stands (pipeline/iterator_state.h), so that
  // Restore on a fresh iterator of the same dataset goes on with exactly
  // the elements this one would give next. Ops that cannot yet say so with
  // CannotSave().
  virtual absl::Status Save(proto::IteratorState* state);
  // Called on a fresh iterator, before its first GetNext.
  virtual absl::Status Restore(const proto::IteratorState& state);
};

class DatasetBase {
 public:
  virtual ~DatasetBase() = default;
  virtual const ElementSpec& element_spec() const = 0;
  // Number of elements, or kInfiniteCardinality / kUnknownCardinality.
  virtual int64_t Cardinality() const = 0;
  virtual absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(
      const IteratorContext& context) const = 0;
  // The op name, for errors ("batch", "map(square)").
  virtual std::string DebugName() const = 0;
};

using DatasetPtr = std::shared_ptr<const DatasetBase>;

// Reads every element (for tests and `sluice run`); fails on an infinite
// dataset unless `limit` >= 0 bounds it.
absl::StatusOr<std::vector<Element>> CollectElements(const DatasetBase& dataset,
                                                     const IteratorContext& context = {}, int64_t limit = -1);

// `dataset` with what its iterators throw (std::bad_alloc from a failed
// allocation, a plugin function's exception) made their error, a Status
// whose message starts with `where` ("step 3 (batch)"), instead of an
// exception that reaches std::terminate. The builder wraps every step.
DatasetPtr ContainExceptions(DatasetPtr dataset, std::string where);

// A cardinality as text: "10", "infinite", "unknown".
std::string CardinalityString(int64_t cardinality);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_DATASET_H_
