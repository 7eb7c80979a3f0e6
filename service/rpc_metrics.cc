#include "service/rpc_metrics.h"

#include <string>

#include "service/metrics.h"

namespace sluice {

void RecordRpc(absl::string_view method, const absl::Status& status,
               std::chrono::steady_clock::time_point start) {
  static CounterFamily& requests = ProcessMetrics().AddCounter(
      "sluice_rpc_requests_total", "RPCs served, by method and status code", {"method", "code"});
  static HistogramFamily& duration = ProcessMetrics().AddHistogram(
      "sluice_rpc_duration_seconds", "time from an RPC's arrival to its answer", {"method"});
  const std::string name(method);
  requests.WithLabels({name, absl::StatusCodeToString(status.code())}).Increment();
  duration.WithLabels({name}).Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace sluice
