// Range checks of every DispatcherService request, done at the RPC edge
// before anything reaches the state machine: a careless or hostile client
// gets InvalidArgument naming the RPC, the field and its value, never a
// processing_mode past the enum, a split for max_splits -5, or a
// repetition (2^62) that the state would allocate for.
//
// These check a request on its own; what needs the state (does the job
// exist, is consumer_index within the job's num_consumers) is checked by
// the dispatcher under its lock.
#ifndef SLUICE_DISPATCHER_REQUEST_CHECKS_H_
#define SLUICE_DISPATCHER_REQUEST_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "sluice/proto/service.pb.h"

namespace sluice::dispatcher {

// The largest repetition a client may ask for: a trainer counts its
// epochs from 0, and 2^40 of them is far past any real run.
inline constexpr int64_t kMaxRepetition = int64_t{1} << 40;
// The longest GetOrCreateIterationRequest.epoch_key.
inline constexpr size_t kMaxEpochKeyBytes = 128;
// Coordinated reads: the most consumers one job may have.
inline constexpr int64_t kMaxConsumers = 1 << 16;
// A restored read's skip_splits: at most 2^20 ranges (delivered splits
// come in long runs, so even a huge epoch needs few).
inline constexpr int kMaxSkipSplitNumbers = 2 << 20;
// A restored parallel_epochs read's skip_positions: at most this many
// workers, and kMaxSkipSplitNumbers numbers over all of them.
inline constexpr int kMaxSkipWorkers = 1 << 16;
// Longest dataset id, job name, worker tag or incarnation taken, and the
// most tags one worker may have.
inline constexpr size_t kMaxNameBytes = 1024;
inline constexpr int kMaxWorkerTags = 256;
// The most splits one GetSplits call may ask for.
inline constexpr int64_t kMaxSplitsPerRequest = int64_t{1} << 20;

// `address` as a worker must give it: HOST:PORT, printable, without a
// scheme. `what` names the field, e.g. "WorkerHeartbeat: worker_address".
absl::Status CheckWorkerAddress(const std::string& what, const std::string& address);

absl::Status CheckRequest(const proto::GetOrRegisterDatasetRequest& request);
absl::Status CheckRequest(const proto::GetDatasetInfoRequest& request);
absl::Status CheckRequest(const proto::GetOrCreateJobRequest& request);
absl::Status CheckRequest(const proto::GetOrCreateIterationRequest& request);
absl::Status CheckRequest(const proto::ClientHeartbeatRequest& request);
absl::Status CheckRequest(const proto::ReleaseIterationClientRequest& request);
absl::Status CheckRequest(const proto::WorkerHeartbeatRequest& request);
absl::Status CheckRequest(const proto::WorkerUpdatesRequest& request);
absl::Status CheckRequest(const proto::WorkerShutdownRequest& request);
absl::Status CheckRequest(const proto::GetSplitsRequest& request);
absl::Status CheckRequest(const proto::DrainWorkerRequest& request);

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_REQUEST_CHECKS_H_
