// EpochLosses: what a parallel_epochs read lost. Each worker runs the whole
// epoch there, so a task that ends lost (its worker killed, restarted, shut
// down, silent or unreachable) before the reader saw its end cut that
// worker's epoch short. The read then fails with DataLoss naming each lost
// worker and the count, unless allow_partial accepts a partial epoch, when
// the same words are a warning (docs/design.md, "What a read promises").
// A task whose worker was drained (scaled down) ends early but cleanly:
// read to its end, it is no loss, and the read warns what it gave.
#ifndef SLUICE_CLIENT_READ_EPOCH_LOSSES_H_
#define SLUICE_CLIENT_READ_EPOCH_LOSSES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sluice::reader {

class EpochLosses {
 public:
  // `elements_per_task`: the worker part's cardinality, which every task
  // produces whole, or negative when unknown. `shared_job`: consumers of a
  // named job split each task's elements, so one reader's count says
  // nothing about what was lost.
  EpochLosses(int64_t elements_per_task, bool shared_job, bool allow_partial)
      : elements_per_task_(elements_per_task), shared_job_(shared_job), allow_partial_(allow_partial) {}

  // A task ended lost after this reader received `elements_read` of its
  // elements. Reporting a task twice counts it once.
  void TaskLost(int64_t task_id, const std::string& worker_address, const std::string& reason,
                int64_t elements_read);
  // What task `task_id` delivered in the end. A task is reported lost when
  // the dispatcher unlists it, yet the requests the reader had in flight to
  // its worker (which may still be alive: only the dispatcher lost it) are
  // answered after that: if they brought the task's end and every element,
  // nothing was lost; otherwise the loss counts what they brought.
  void Settle(int64_t task_id, bool read_whole, int64_t elements_read);
  // Task `task_id`'s worker was drained while the task ran
  // (ClientHeartbeatResponse.drained_tasks): Settle counts it whole once
  // its end was read, whatever its count, and Finish warns of it.
  void TaskDrained(int64_t task_id, const std::string& worker_address);
  bool empty() const { return lost_.empty(); }

  // At the end of the read, of which `tasks_seen` tasks were part: OK when
  // nothing was lost; DataLoss describing the loss; or, with allow_partial,
  // OK after a warning that says the same.
  absl::Status Finish(int64_t tasks_seen) const;
  // The description Finish uses.
  std::string Describe(int64_t tasks_seen) const;
  // Finish's warning about the drained tasks read to their end; "" when
  // none ended short (or cannot be told to have).
  std::string DescribeDrained() const;

 private:
  struct Lost {
    int64_t task_id = 0;
    std::string worker_address;
    std::string reason;
    int64_t elements_read = 0;
  };

  struct Drained {
    std::string worker_address;
    bool read_whole = false;  // settled so
    int64_t elements_read = 0;
  };

  const int64_t elements_per_task_;
  const bool shared_job_;
  const bool allow_partial_;
  std::vector<Lost> lost_;
  std::map<int64_t, Drained> drained_;  // by task id
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_EPOCH_LOSSES_H_
