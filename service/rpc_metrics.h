// The RPC metrics both daemons export: sluice_rpc_requests_total{method,
// code} and sluice_rpc_duration_seconds{method}, recorded by the gRPC
// adapters as each call finishes.
#ifndef SLUICE_SERVICE_RPC_METRICS_H_
#define SLUICE_SERVICE_RPC_METRICS_H_

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// Records one finished call of `method` that began at `start`.
void RecordRpc(absl::string_view method, const absl::Status& status,
               std::chrono::steady_clock::time_point start);

}  // namespace sluice

#endif  // SLUICE_SERVICE_RPC_METRICS_H_
