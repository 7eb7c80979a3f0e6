// Helpers for IteratorBase::Save and Restore: an iterator writes its
// counters, the elements it holds and its inputs' states into a
// proto::IteratorState, and reads them back on a fresh iterator.
#ifndef SLUICE_PIPELINE_ITERATOR_STATE_H_
#define SLUICE_PIPELINE_ITERATOR_STATE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/dataset.h"
#include "pipeline/split_provider.h"
#include "sluice/proto/checkpoint.pb.h"

namespace sluice {

// The version PipelineCheckpoint::version carries; a reader refuses others.
inline constexpr int kPipelineCheckpointVersion = 1;

// A whole pipeline's state as PipelineCheckpoint bytes (restored by
// pipeline/pipeline_restore.h, which parses them with ParsePipelineCheckpoint:
// FailedPrecondition naming both fingerprints for another pipeline's).
absl::StatusOr<std::string> SavePipelineState(IteratorBase& root, const std::string& fingerprint);
// The checkpoint in `bytes`, checked for its version and fingerprint.
absl::StatusOr<proto::PipelineCheckpoint> ParsePipelineCheckpoint(const std::string& bytes,
                                                                  const std::string& fingerprint);

// Unimplemented, for an op that cannot save its position (yet). The step
// that contains it (ContainExceptions) names itself in the message.
absl::Status CannotSave();
bool IsCannotSave(const absl::Status& status);

// InvalidArgument: the state does not fit this iterator (a truncated or
// hand-edited checkpoint; another pipeline's is refused by fingerprint
// before any iterator sees it).
absl::Status MalformedState(const std::string& what);

// The int at `key`, or MalformedState naming it.
absl::StatusOr<int64_t> StateInt(const proto::IteratorState& state, const std::string& key);

// Appends `input`'s state to state->inputs.
absl::Status SaveInput(IteratorBase& input, proto::IteratorState* state);
// Restores `input` from state.inputs(index).
absl::Status RestoreInput(IteratorBase& input, const proto::IteratorState& state, int index = 0);

// An iterator whose state is one counter and its input's.
absl::Status SaveCounter(IteratorBase& input, const std::string& key, int64_t value,
                         proto::IteratorState* state);
absl::Status RestoreCounter(IteratorBase& input, const std::string& key, int64_t* value,
                            const proto::IteratorState& state);

// A source that reads its files in a per-epoch order (list_files,
// image_folder): the order, how many orders its dataset has drawn (the next
// epoch's under repeat), and the position.
absl::Status SaveFileOrder(const std::vector<int64_t>& order, uint64_t orders_drawn,
                           const SourcePositions& positions, proto::IteratorState* state);
absl::Status RestoreFileOrder(const proto::IteratorState& state, std::vector<int64_t>* order,
                              std::atomic<uint64_t>* orders_drawn, SourcePositions* positions);

// A source that reads files one after another (record files, tar shards):
// the next file's position, the open file, and how many items (records,
// samples) it gave. A restore opens that file again and reads past them.
struct OpenFileState {
  bool open = false;
  int64_t file = 0;
  int64_t items = 0;
};
absl::Status SaveOpenFile(const OpenFileState& open_file, const SourcePositions& files,
                          proto::IteratorState* state);
absl::StatusOr<OpenFileState> RestoreOpenFile(const proto::IteratorState& state, int64_t num_files,
                                              SourcePositions* files);
// Reads `count` items with `read_one` (false at the file's end, which is
// DataLoss naming `path`: the file changed since the save).
absl::Status SkipItems(int64_t count, const std::function<absl::StatusOr<bool>()>& read_one,
                       const std::string& path, const char* items);

// Elements held by an iterator, kept in state->elements.
void SaveElement(const Element& element, proto::IteratorState* state);
absl::StatusOr<Element> RestoreElement(const proto::IteratorState& state, int index);
// Every element in state.elements, in order.
absl::StatusOr<std::vector<Element>> RestoreElements(const proto::IteratorState& state);

// A status an iterator holds for later (an error to report in turn), as
// "code" and "message".
void SaveStatus(const absl::Status& status, proto::IteratorState* state);
absl::StatusOr<absl::Status> RestoreStatus(const proto::IteratorState& state);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_ITERATOR_STATE_H_
