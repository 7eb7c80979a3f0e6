// CoordinatedReader: the round loop of a coordinated read (num_consumers
// set). Every consumer reads round by round, one element a round, from the
// task all consumers agree serves it; a worker answers a round once every
// consumer is waiting for it, so that consumers get batches of the same
// size at the same step.
#ifndef SLUICE_CLIENT_READ_COORDINATED_READER_H_
#define SLUICE_CLIENT_READ_COORDINATED_READER_H_

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "client/read/read_state.h"
#include "sluice/proto/service.pb.h"

namespace sluice::reader {

// The task that serves `round`, which every consumer works out alike: the
// tasks still listed that have started by then, by id, taken round-robin;
// or 0 when none has.
int64_t TaskForRound(const std::map<int64_t, TaskState>& tasks, int64_t round);

class CoordinatedReader {
 public:
  // `state` outlives the reader.
  CoordinatedReader(ReadState& state, proto::WireCompression compression, int64_t consumer_index);

  // Asks the round's worker for this consumer's element of each round in
  // turn, until the read is cancelled or fails. Runs on its own thread.
  void RoundLoop();

 private:
  // The next round can be asked for: room in the buffer, a task list that
  // holds for it, and a task to ask.
  bool RoundReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);

  ReadState& state_;
  const proto::WireCompression compression_;
  const int64_t consumer_index_;
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_COORDINATED_READER_H_
