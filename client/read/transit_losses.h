// TransitLosses: elements a worker handed out in a response that never
// reached this reader, while the worker lived on to end its task (a dropped
// connection, a call past its deadline). The worker keeps no copy of an
// answer (docs/design.md, "Failures"), so those elements are gone; a sole
// reader sees the hole in the task's element indices (each response's
// first_index) and the read ends with DataLoss naming the worker, the task
// and the indices, or, with allow_partial, a warning that says the same.
// A task whose worker is lost instead is covered elsewhere: parallel_epochs
// counts its loss (epoch_losses.h), distributed_epoch reads its splits again.
#ifndef SLUICE_CLIENT_READ_TRANSIT_LOSSES_H_
#define SLUICE_CLIENT_READ_TRANSIT_LOSSES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sluice::reader {

// One task's hole-tracking: the next element index the reader expects and
// what went missing before it.
class TaskIndexGaps {
 public:
  // A response of `count` elements from index `first_index` is delivered,
  // in the task's order.
  void Delivered(int64_t first_index, int64_t count);
  // The worker said the task ends at `end_index` (its end of sequence
  // comes outside the task's order: judge once every response is in).
  void Ended(int64_t end_index) { end_index_ = end_index; }
  bool ended() const { return end_index_ >= 0; }
  // Missing so far: the holes between responses, and, once ended, the run
  // before the end.
  int64_t lost() const;
  // The first missing run, [first_lost(), first_lost_end()).
  int64_t first_lost() const { return lost_ > 0 ? first_lost_ : next_index_; }
  int64_t first_lost_end() const { return lost_ > 0 ? first_lost_end_ : end_index_; }

 private:
  int64_t next_index_ = 0;
  int64_t end_index_ = -1;
  int64_t lost_ = 0;  // in holes between responses
  int64_t first_lost_ = -1;
  int64_t first_lost_end_ = -1;
};

class TransitLosses {
 public:
  // The task, read to its end, had `gaps`; nothing is recorded when none.
  void TaskEnded(int64_t task_id, const std::string& worker_address, const TaskIndexGaps& gaps);
  bool empty() const { return lost_.empty(); }

  // At the end of the read: OK when nothing was lost; DataLoss naming each
  // task; or, with allow_partial, OK after a warning that says the same.
  absl::Status Finish(bool allow_partial) const;
  std::string Describe() const;

 private:
  struct Lost {
    int64_t task_id = 0;
    std::string worker_address;
    int64_t elements = 0;
    int64_t first = 0;
    int64_t first_end = 0;
  };
  std::vector<Lost> lost_;
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_TRANSIT_LOSSES_H_
