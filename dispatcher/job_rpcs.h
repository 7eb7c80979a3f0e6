// JobRpcs: the requests that make what clients read. A client registers
// its dataset (deduplicated by fingerprint), gets or creates a job, then
// an iteration for its next repetition, which makes one task per live
// worker, and gets an iteration-client id and secret.
#ifndef SLUICE_DISPATCHER_JOB_RPCS_H_
#define SLUICE_DISPATCHER_JOB_RPCS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "dispatcher/dispatcher_core.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

class JobRpcs {
 public:
  explicit JobRpcs(DispatcherCore& core);

  // A tenant sees and makes only its own datasets, jobs and iterations;
  // the default Caller is the cluster, which sees all.
  absl::Status GetOrRegisterDataset(const proto::GetOrRegisterDatasetRequest& request,
                                    proto::GetOrRegisterDatasetResponse* response, const Caller& caller);
  absl::Status GetDatasetInfo(const proto::GetDatasetInfoRequest& request,
                              proto::GetDatasetInfoResponse* response, const Caller& caller);
  absl::Status GetOrCreateJob(const proto::GetOrCreateJobRequest& request,
                              proto::GetOrCreateJobResponse* response, const Caller& caller);
  absl::Status GetOrCreateIteration(const proto::GetOrCreateIterationRequest& request,
                                    proto::GetOrCreateIterationResponse* response, const Caller& caller);

 private:
  using Clock = DispatcherCore::Clock;
  using NewTasks = DispatcherCore::NewTasks;

  // The restore proof of `job` ("" without auth), and the check of a
  // restore's: PermissionDenied unless it is the job's.
  std::string RestoreKey(const DispatcherState::Job& job, int64_t repetition) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  absl::Status CheckRestoreKey(const DispatcherState::Job& job,
                               const proto::GetOrCreateIterationRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);
  // A restore of an anonymous job's saved read (restore_job_id), into an
  // anonymous job.
  static bool IsAnonymousRestore(const DispatcherState::Job& job,
                                 const proto::GetOrCreateIterationRequest& request);
  // The running restores of the same saved read (tenant, dataset, saved
  // job and repetition) that this one supersedes: one key holds at most
  // one restored repetition at a time, so restores cannot pile up skip
  // lists, yet a trainer that crashed restores again at once.
  std::vector<int64_t> SupersededRestores(const DispatcherState::Job& job,
                                          const proto::GetOrCreateIterationRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu_);

  DispatcherCore& core_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_JOB_RPCS_H_
