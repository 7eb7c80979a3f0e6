// DispatcherState: everything the dispatcher knows that must survive a
// restart, as a pure state machine. It changes only through Apply(Update),
// so that replaying the journal of updates rebuilds it exactly; it does no
// I/O and no locking (DispatcherCore owns both).
#ifndef SLUICE_DISPATCHER_DISPATCHER_STATE_H_
#define SLUICE_DISPATCHER_DISPATCHER_STATE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/dataset.h"
#include "pipeline/sharding.h"
#include "service/int_ranges.h"
#include "service/job_params.h"
#include "service/worker_positions.h"
#include "sluice/proto/journal.pb.h"

namespace sluice::dispatcher {

// Splits held in runs (Split with count > 1), by first seq; the runs in one
// map never overlap.
using SplitRuns = std::map<int64_t, Split>;

// Whether a worker may run a task of the job: any worker, or for static
// sharding a listed one.
inline bool RunsOn(const proto::JobParams& params, const std::string& address) {
  return !IsStaticSharding(params) ||
         std::find(params.static_workers().begin(), params.static_workers().end(), address) !=
             params.static_workers().end();
}

// How many splits `runs` hold.
int64_t CountSplits(const SplitRuns& runs);
// Removes splits [seq, seq + count) when one run holds them all, splitting
// that run; false, changing nothing, otherwise.
bool RemoveSplits(SplitRuns* runs, int64_t seq, int64_t count);
// Whether one of `runs` holds split `seq`.
bool HoldsSplit(const SplitRuns& runs, int64_t seq);

class DispatcherState {
 public:
  struct Dataset {
    std::string id;
    std::string fingerprint;
    proto::DatasetDef def;
    std::string tenant;
  };
  struct Worker {
    std::string address;
    std::vector<std::string> tags;
    std::string incarnation;
  };
  struct Job {
    int64_t id = 0;
    proto::JobParams params;
    // Iteration ids by repetition (a map: a client names the repetition,
    // and 2^62 must cost no more than 0).
    std::map<int64_t, int64_t> iterations;
  };
  struct Task {
    int64_t id = 0;
    int64_t iteration_id = 0;
    std::string worker_address;
    bool finished = false;
    // Ended because its worker was removed, or because its readers could
    // not reach the worker (LoseTask): over for good, even if a worker
    // re-registers at the same address.
    bool lost = false;
    // Why, when lost.
    std::string lost_reason;
    // A client read it to its end, so its splits are delivered.
    bool completed = false;
    // distributed_epoch: the last GetSplits request answered, and its
    // answer, for retries.
    int64_t last_split_request = 0;
    std::vector<Split> last_split_response;
    bool last_end_of_splits = false;
    // Splits handed to this task and not yet known delivered.
    SplitRuns leases;
    // Coordinated reads: the first round this task serves.
    int64_t starting_round = 0;
    // Its worker was drained while it ran (DrainWorker): it was told its
    // splits had ended, or stopped its parallel_epochs epoch early. Ending
    // so, it is finished, not lost, but its iteration's splits may still
    // need another task (HasUnreadSplits).
    bool drained = false;
  };
  struct Iteration {
    int64_t id = 0;
    int64_t job_id = 0;
    int64_t repetition = 0;
    // CreateIteration.epoch_key: which peer readers started it.
    std::string epoch_key;
    // A restore of an anonymous job's read: the job it was saved from
    // (CreateIteration.restored_from_job), 0 otherwise.
    int64_t restored_from_job = 0;
    std::vector<int64_t> tasks;
    std::set<int64_t> clients;
    // The first client it ever had, and whether another (not that one
    // resumed) has joined since: an exactly_once read shared by several
    // consumers cannot survive a lost task (shared_exactly_once.h).
    int64_t first_client = 0;
    bool several_clients = false;
    // Every task finished (and there is at least one), or collected.
    bool finished = false;
    // Garbage-collected: abandoned by its clients; its tasks are dropped.
    bool collected = false;
    // distributed_epoch: the split provider's saved position, the number
    // for the next new split, and splits of lost tasks waiting to be
    // handed out again (before any new split).
    std::string split_cursor;
    int64_t next_split_seq = kFirstSplitSeq;
    SplitRuns returned_splits;
    bool splits_exhausted = false;
    // A restored read's splits already delivered: never handed out.
    IntRanges skip_splits;
    // CreateIteration.skip_positions: per worker, the positions of its
    // parallel_epochs epoch its task passes over.
    WorkerRanges skip_positions;
    // Coordinated reads: task lists are fixed through this round, and the
    // consumer indexes that have joined.
    int64_t round_horizon = 0;
    std::set<int64_t> consumers_joined;
    // Failed (FailIteration): an absl::StatusCode and the cause; 0 else.
    int error_code = 0;
    std::string error_message;
    // distributed_epoch over a dataset without end (repeat without a
    // count): its splits are not leased.
    bool infinite = false;
    // A shared exactly_once read (HoldsLostSplits): a lost task's
    // unfinished splits wait here, not in returned_splits, until every
    // client awaited has said which of their positions it took (hold
    // `hold`, counted from 1); taken_positions gathers those, per split
    // still out, and a rerun passes over them (docs/design.md, "Shared
    // exactly_once reads after a lost worker").
    SplitRuns held_splits;
    int64_t hold = 0;
    std::set<int64_t> awaiting_reports;
    std::map<int64_t, IntRanges> taken_positions;
    // Derived from the tasks, never journaled: the task holding each lease
    // run (by its first seq), so that a delivered split finds its task
    // without a look through all of them, and the tasks not finished. At
    // 10,000 workers either search cost milliseconds per update.
    std::map<int64_t, int64_t> lease_holders;
    int64_t unfinished_tasks = 0;
  };

  // Applies one update; an update that contradicts the state (an unknown
  // id) is FailedPrecondition and changes nothing.
  absl::Status Apply(const proto::Update& update);

  // The whole state, and the state a snapshot describes.
  proto::StateSnapshot ToSnapshot() const;
  // The same into `snapshot` (empty), which may live on an arena.
  void FillSnapshot(proto::StateSnapshot* snapshot) const;
  static absl::StatusOr<DispatcherState> FromSnapshot(const proto::StateSnapshot& snapshot);

  // Lookups; nullptr when absent.
  const Dataset* FindDataset(const std::string& id) const;
  // In `tenant`'s namespace ("" for the default tenant).
  const Dataset* FindDatasetByFingerprint(const std::string& fingerprint,
                                          const std::string& tenant = "") const;
  const Job* FindJob(int64_t id) const;
  const Job* FindJobByName(const std::string& name, const std::string& tenant = "") const;
  const Iteration* FindIteration(int64_t id) const;
  const Iteration* FindIterationForRepetition(int64_t job_id, int64_t repetition) const;
  // Whether split `seq` of `iteration` is out: leased to a task, or returned
  // and waiting for one. Completing any other split changes nothing.
  bool IsSplitOutstanding(const Iteration& iteration, int64_t seq) const;
  std::optional<int64_t> IterationOfClient(int64_t iteration_client_id) const;
  const Task* FindTask(int64_t id) const;
  const Worker* FindWorker(const std::string& address) const;
  // A registered worker being drained: it gets no new tasks or splits.
  bool IsDraining(const std::string& address) const { return draining_workers_.contains(address); }

  const std::map<std::string, Dataset>& datasets() const { return datasets_; }
  const std::map<std::string, Worker>& workers() const { return workers_; }
  const std::map<int64_t, Job>& jobs() const { return jobs_; }
  const std::map<int64_t, Iteration>& iterations() const { return iterations_; }
  const std::map<int64_t, Task>& tasks() const { return tasks_; }
  std::vector<const Task*> TasksOfWorker(const std::string& address) const;

  // Ids for the next objects; ids are never reused.
  int64_t NextJobId() const { return next_job_id_; }
  int64_t NextIterationId() const { return next_iteration_id_; }
  int64_t NextTaskId() const { return next_task_id_; }
  int64_t NextIterationClientId() const { return next_iteration_client_id_; }
  // The counter's id, or the first after it not taken (an old journal's
  // explicit numbers may hold some).
  std::string NextDatasetId() const;

  // distributed_epoch: splits that a task yet to be made must read, returned
  // by lost tasks (or held for their clients' reports) or never handed out
  // before the last tasks were lost.
  bool HasUnreadSplits(const Iteration& iteration) const;
  // A shared exactly_once read: consumers take a task's elements first come,
  // first served, so a lost task's splits are held until each consumer
  // reports what it took of them (issue 50, finding 10).
  bool HoldsLostSplits(const Iteration& iteration) const;
  // The lowest seq of `iteration` still out (leased, returned, held or not
  // handed out yet): every split below it is delivered.
  int64_t LowestOutstandingSplit(const Iteration& iteration) const;

 private:
  void UpdateFinished(Iteration& iteration);
  // A lost task's undelivered splits go back to its iteration, or are held
  // for its clients' reports (HoldsLostSplits).
  void ReturnLeases(Task& task);
  // A lost task's `leases` go back to the iteration, or are held for its
  // clients' reports (HoldsLostSplits).
  void HoldOrReturn(Iteration& iteration, const SplitRuns& leases);
  // `runs` were delivered: their taken positions go.
  void ForgetTakenPositions(Iteration& iteration, const SplitRuns& runs);
  // Held splits go back once no client is awaited.
  void ReturnHeldIfAnswered(Iteration& iteration);
  // ReportTakenPositions.
  absl::Status ApplyTakenPositions(const proto::Update::ReportTakenPositions& u);
  // The only ways a task's leases and finished flag change, keeping the
  // iteration's derived fields in step.
  void AddLease(Iteration& iteration, Task& task, const Split& run);
  void DeliverSplit(Iteration& iteration, int64_t seq);
  void ClearLeases(Task& task);
  void MarkFinished(Task& task);
  // Rebuilds what is derived (lease_holders, unfinished_tasks,
  // tasks_of_worker_) after a snapshot is read.
  void RebuildIndexes();
  // A collected or failed iteration reads no more splits: its leases,
  // returned splits and cached answers go.
  void DropSplits(Iteration& iteration);

  std::map<std::string, Dataset> datasets_;
  // By (tenant, fingerprint).
  std::map<std::pair<std::string, std::string>, std::string> dataset_by_fingerprint_;
  std::map<std::string, Worker> workers_;
  // DrainWorker's, until each is removed.
  std::set<std::string> draining_workers_;
  std::map<int64_t, Job> jobs_;
  // By (tenant, name).
  std::map<std::pair<std::string, std::string>, int64_t> job_by_name_;
  std::map<int64_t, Iteration> iterations_;
  std::map<int64_t, Task> tasks_;
  // Derived: each worker address's tasks, in the order they were made.
  std::map<std::string, std::vector<int64_t>> tasks_of_worker_;
  std::map<int64_t, int64_t> iteration_of_client_;
  int64_t next_dataset_id_ = 1000;
  int64_t next_job_id_ = 1;
  int64_t next_iteration_id_ = 1;
  int64_t next_task_id_ = 1;
  int64_t next_iteration_client_id_ = 1;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_DISPATCHER_STATE_H_
