// The dispatcher's restart time against the length of its journal
// (bench/control_plane --restart, issue 36). A journal of N updates is made
// by a dispatcher in this process (MakeJournal: its work dir on tmpfs,
// where a sync costs nothing), copied to disk, and recovered by a
// DispatcherImpl here (ReplayInProcess: the replay alone) and by a real
// dispatcherd (control_plane.cc: until it serves).
#ifndef SLUICE_BENCH_CONTROL_PLANE_JOURNAL_RESTART_H_
#define SLUICE_BENCH_CONTROL_PLANE_JOURNAL_RESTART_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "dispatcher/dispatcher_config.h"

namespace sluice::bench {

// `compacted`: the default snapshot settings (a snapshot every 10,000
// records), so a restart reads a snapshot and at most that many records;
// otherwise no snapshot is written and every update is replayed. Workers
// and clients never time out, so that nothing changes the state but the
// updates made here.
dispatcher::DispatcherConfig RestartConfig(const std::string& work_dir, bool compacted);

struct MadeJournal {
  int64_t updates = 0;  // applied and journaled
  double seconds = 0;
};

// Registers a dataset, 100 workers and a distributed_epoch iteration with
// one client, then leases splits (16 per GetSplits) and completes them (a
// client heartbeat after every 8 leases), as a read does, until `updates`
// updates are journaled in `work_dir`.
absl::StatusOr<MadeJournal> MakeJournal(int64_t updates, bool compacted, const std::string& work_dir);

// Seconds DispatcherImpl::Start takes to recover `work_dir`.
absl::StatusOr<double> ReplayInProcess(const std::string& work_dir, bool compacted);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_CONTROL_PLANE_JOURNAL_RESTART_H_
