// CrossTrainerCache: what one task of a cross-trainer job keeps so that
// several trainers read its whole stream while its pipeline computes each
// element once (tf.data's CrossTrainerCache; docs/design.md, "Cross-trainer
// sharing"). It holds the latest elements sent to the leading trainer, up
// to max_bytes, and each trainer's position in the stream. A trainer
// behind the oldest element kept skips to it. Elements share their tensors
// with what is sent, so a trainer that follows costs no pipeline work and
// no copy of the data.
//
// Not thread-safe: the task's mutex guards it.
#ifndef SLUICE_WORKER_CROSS_TRAINER_CACHE_H_
#define SLUICE_WORKER_CROSS_TRAINER_CACHE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "sluice/element.h"

namespace sluice::worker {

class CrossTrainerCache {
 public:
  // Distinct trainers one task keeps positions for: a position is a few
  // bytes, but the trainer ids come from the network.
  static constexpr int kMaxTrainers = 1024;
  static constexpr size_t kMaxTrainerIdBytes = 128;

  // Where a trainer is: its next element in the stream, and how many
  // elements it has been sent (a response's first_index, which has no
  // gaps where the trainer skipped).
  struct Cursor {
    int64_t position = 0;
    int64_t sent = 0;
  };

  explicit CrossTrainerCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // `trainer`'s cursor. A trainer new to the task starts at the oldest
  // element kept, which others have read: it shares their compute. An
  // empty or too long id, or one trainer too many, is an error naming it.
  absl::StatusOr<Cursor*> Find(const std::string& trainer);

  // How many elements a cursor behind the oldest element kept skips to
  // reach it; 0 for one that is not behind.
  int64_t Behind(const Cursor& cursor) const {
    return cursor.position < begin_ ? begin_ - cursor.position : 0;
  }

  // Whether `cursor` has a kept element to read (otherwise it is at the
  // head of the stream, and the next element comes from the pipeline).
  bool HasKept(const Cursor& cursor) const { return cursor.position < end_; }
  // The kept element at `position`, begin() <= position < end().
  const Element& At(int64_t position) const {
    return elements_[static_cast<size_t>(position - begin_)].element;
  }

  // The stream's next element, sent now to the trainer at its head: kept,
  // then the oldest ones dropped while more than max_bytes are kept.
  void Append(const Element& element);

  // Counts elements a trainer read from what is kept (hits: computed once,
  // sent again), and elements a trainer skipped.
  static void CountHits(int64_t elements);
  static void CountSkipped(int64_t elements);

  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  int64_t bytes() const { return bytes_; }
  int64_t max_bytes() const { return max_bytes_; }

 private:
  struct Kept {
    Element element;
    int64_t bytes = 0;
  };

  const int64_t max_bytes_;
  std::deque<Kept> elements_;  // positions [begin_, end_)
  int64_t begin_ = 0;
  int64_t end_ = 0;
  int64_t bytes_ = 0;
  std::map<std::string, Cursor> cursors_;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_CROSS_TRAINER_CACHE_H_
