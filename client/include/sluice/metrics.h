// This process's metrics, for a trainer to read or export: the client's
// wait time and bytes received, the process's CPU and memory, and counters
// a trainer adds (as sluice.torch does).
//
//   std::cout << sluice::MetricsText();  // Prometheus text format 0.0.4
//   sluice::IncrementCounter("my_skipped_batches_total", "Batches skipped.", 2);
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_METRICS_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_METRICS_H_

#include <string>

namespace sluice {

// Every metric of this process with samples, in Prometheus text format
// 0.0.4, sorted by name.
std::string MetricsText();

// Adds `amount` (>= 0) to the unlabelled counter `name`, registered with
// `help` at first use. A name that is not a valid metric name, or that is
// registered as another kind or with another help, aborts: metric names
// are the program's, not its input's.
void IncrementCounter(const std::string& name, const std::string& help, double amount = 1);

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_METRICS_H_
