// The dispatcher's quotas (DispatcherConfig::max_* and tenant_max_*): what
// clients may make the dispatcher hold, in all and per tenant. Checks on
// the state alone; JobRpcs makes them under the dispatcher's lock before the
// update that would pass a quota, so a refused request changes nothing.
// Each refusal is ResourceExhausted naming the RPC, who holds how many, and
// the quota passed.
#ifndef SLUICE_DISPATCHER_TENANT_QUOTAS_H_
#define SLUICE_DISPATCHER_TENANT_QUOTAS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dispatcher/dispatcher_config.h"
#include "dispatcher/dispatcher_state.h"
#include "sluice/proto/dataset.pb.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// One more dataset of `def`'s size for `tenant` (max_datasets,
// max_definition_bytes and their tenant_ forms).
absl::Status CheckDatasetQuota(const DispatcherState& state, const DispatcherConfig& config,
                               const proto::DatasetDef& def, const std::string& tenant);
// One more job for `tenant` (max_jobs, tenant_max_jobs).
absl::Status CheckJobQuota(const DispatcherState& state, const DispatcherConfig& config,
                           const std::string& tenant);
// One more iteration of a job of `tenant` (max_iterations,
// tenant_max_iterations).
absl::Status CheckIterationQuota(const DispatcherState& state, const DispatcherConfig& config,
                                 const std::string& tenant);

// A restored read's skip lists (or a shared read's taken positions, for
// `rpc` ClientHeartbeat or ReleaseIterationClient) for `tenant` holding
// `adding` more numbers (max_restore_numbers, tenant_max_restore_numbers).
absl::Status CheckRestoreQuota(const DispatcherState& state, const DispatcherConfig& config,
                               const std::string& tenant, int64_t adding,
                               absl::string_view rpc = "GetOrCreateIteration");
// The numbers an iteration's skip lists hold (each range two), and those a
// request's would.
int64_t RestoreNumbers(const DispatcherState::Iteration& iteration);
int64_t RestoreNumbers(const proto::GetOrCreateIterationRequest& request);

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_TENANT_QUOTAS_H_
