// The arithmetic of split runs. A run is `count` consecutive splits of one
// size (see Split in pipeline/dataset.h): the dispatcher leases, journals
// and sends consecutive splits as one run, and a worker reads them back one
// split at a time. Joining splits into runs, taking parts of a run, checking
// a run's size and converting runs to and from messages all live here, so
// that the dispatcher, the worker and the sources do the same sums.
//
//   Split run{0, 10, 3};                     // split 3: positions [0, 10)
//   ExtendSplitRun(&run, Split{10, 20, 4});  // run == {0, 20, 3, 2, 10}
//   SplitRunPart(run, 1, 1);                 // == Split{10, 20, 4}
#ifndef SLUICE_PIPELINE_SPLIT_RUN_H_
#define SLUICE_PIPELINE_SPLIT_RUN_H_

#include <algorithm>
#include <cstdint>

#include "pipeline/dataset.h"

namespace sluice {

// Adds `next`, a single split, to the end of `run` if it continues it: the
// next seq, starting where the run ends, no longer than the run's splits,
// and the run's last split full. Returns false, changing nothing, if not.
bool ExtendSplitRun(Split* run, const Split& next);
// Splits [first, first + n) of `run`, by index within the run.
Split SplitRunPart(const Split& run, int64_t first, int64_t n);

// Whether a run's split size suits its count: any for a single split; for a
// run of several, a positive split_size with count * split_size within
// int64, so that SplitRunPart cannot overflow. A count below 1 is invalid.
bool ValidSplitRunSize(const Split& run);

// A split as a message with seq, begin, end, count and split_size fields
// (SplitProto on the wire, SplitLease in the journal), and back. A count of
// 0, as messages written before runs have, reads as 1.
template <typename SplitMessage>
Split SplitFromMessage(const SplitMessage& message) {
  const int64_t count = std::max<int64_t>(1, message.count());
  return Split{message.begin(), message.end(), message.seq(), count, count == 1 ? 0 : message.split_size()};
}
template <typename SplitMessage>
void SplitToMessage(const Split& split, SplitMessage* message) {
  message->set_seq(split.seq);
  message->set_begin(split.begin);
  message->set_end(split.end);
  if (split.count != 1) {
    message->set_count(split.count);
    message->set_split_size(split.split_size);
  }
}

}  // namespace sluice

#endif  // SLUICE_PIPELINE_SPLIT_RUN_H_
