#include "bench/control_plane/journal_restart.h"

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/control_plane/sim_fleet.h"
#include "dispatcher/dispatcher_impl.h"
#include "service/grpc_util.h"

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWorkers = 100;
constexpr int kLeasesPerHeartbeat = 8;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <typename Request>
Request Versioned() {
  Request request;
  request.mutable_version()->set_protocol_version(kProtocolVersion);
  return request;
}

}  // namespace

dispatcher::DispatcherConfig RestartConfig(const std::string& work_dir, bool compacted) {
  dispatcher::DispatcherConfig config;
  config.work_dir = work_dir;
  config.worker_timeout_ms = 86400000;
  config.client_timeout_ms = 86400000;
  config.job_gc_timeout_ms = 86400000;
  config.log_level = "warn";
  if (!compacted) {
    config.snapshot_interval = 1 << 30;
    config.snapshot_bytes = int64_t{1} << 40;
  }
  return config;
}

absl::StatusOr<MadeJournal> MakeJournal(int64_t updates, bool compacted, const std::string& work_dir) {
  const Clock::time_point start = Clock::now();
  dispatcher::DispatcherImpl impl(RestartConfig(work_dir, compacted));
  if (absl::Status s = impl.Start(); !s.ok()) return s;
  MadeJournal made;

  auto dataset = Versioned<proto::GetOrRegisterDatasetRequest>();
  proto::RangeOp* range = dataset.mutable_dataset()->add_steps()->mutable_range();
  range->set_stop(int64_t{1} << 50);
  range->set_step(1);
  proto::GetOrRegisterDatasetResponse registered;
  if (absl::Status s = impl.GetOrRegisterDataset(dataset, &registered); !s.ok()) return s;
  ++made.updates;
  for (int i = 0; i < kWorkers; ++i) {
    auto heartbeat = Versioned<proto::WorkerHeartbeatRequest>();
    heartbeat.set_worker_address(SimFleet::WorkerAddress(i));
    proto::WorkerHeartbeatResponse answer;
    if (absl::Status s = impl.WorkerHeartbeat(heartbeat, &answer); !s.ok()) return s;
    ++made.updates;
  }
  auto job_request = Versioned<proto::GetOrCreateJobRequest>();
  job_request.mutable_params()->set_dataset_id(registered.dataset_id());
  job_request.mutable_params()->set_processing_mode(proto::DISTRIBUTED_EPOCH);
  proto::GetOrCreateJobResponse job;
  if (absl::Status s = impl.GetOrCreateJob(job_request, &job); !s.ok()) return s;
  auto iteration_request = Versioned<proto::GetOrCreateIterationRequest>();
  iteration_request.set_job_id(job.job_id());
  proto::GetOrCreateIterationResponse iteration;
  if (absl::Status s = impl.GetOrCreateIteration(iteration_request, &iteration); !s.ok()) return s;
  made.updates += 3 + kWorkers;  // job, iteration, its client and a task per worker

  std::vector<int64_t> tasks;
  for (int i = 0; i < kWorkers; ++i) {
    auto heartbeat = Versioned<proto::WorkerHeartbeatRequest>();
    heartbeat.set_worker_address(SimFleet::WorkerAddress(i));
    proto::WorkerHeartbeatResponse answer;
    if (absl::Status s = impl.WorkerHeartbeat(heartbeat, &answer); !s.ok()) return s;
    for (const proto::TaskDef& task : answer.new_tasks()) tasks.push_back(task.task_id());
  }
  if (tasks.size() != kWorkers) {
    return absl::InternalError(
        absl::StrCat("expected ", kWorkers, " tasks, the workers were given ", tasks.size()));
  }

  auto client_heartbeat = Versioned<proto::ClientHeartbeatRequest>();
  client_heartbeat.set_iteration_client_id(iteration.iteration_client_id());
  client_heartbeat.set_client_secret(iteration.client_secret());
  int64_t request_id = 0;
  while (made.updates < updates) {
    auto lease = Versioned<proto::GetSplitsRequest>();
    lease.set_iteration_id(iteration.iteration_id());
    lease.set_task_id(tasks[request_id % tasks.size()]);
    lease.set_max_splits(16);
    lease.set_request_id(++request_id);
    proto::GetSplitsResponse leased;
    if (absl::Status s = impl.GetSplits(lease, &leased); !s.ok()) return s;
    if (leased.splits_size() == 0) return absl::InternalError("GetSplits leased nothing");
    ++made.updates;
    for (const proto::SplitProto& split : leased.splits()) {
      for (int64_t s = 0; s < std::max<int64_t>(1, split.count()); ++s) {
        client_heartbeat.add_completed_splits(split.seq() + s);
      }
    }
    if (request_id % kLeasesPerHeartbeat == 0 && made.updates < updates) {
      proto::ClientHeartbeatResponse answer;
      if (absl::Status s = impl.ClientHeartbeat(client_heartbeat, &answer); !s.ok()) return s;
      client_heartbeat.clear_completed_splits();
      ++made.updates;
    }
  }
  made.seconds = SecondsSince(start);
  return made;
}

absl::StatusOr<double> ReplayInProcess(const std::string& work_dir, bool compacted) {
  dispatcher::DispatcherImpl impl(RestartConfig(work_dir, compacted));
  const Clock::time_point start = Clock::now();
  if (absl::Status s = impl.Start(); !s.ok()) return s;
  return SecondsSince(start);
}

}  // namespace sluice::bench
