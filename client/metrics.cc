// The public face of the process's metrics registry (service/metrics.h).
#include "sluice/metrics.h"

#include "service/metrics.h"

namespace sluice {

std::string MetricsText() { return ProcessMetrics().Render(); }

void IncrementCounter(const std::string& name, const std::string& help, double amount) {
  ProcessMetrics().AddCounter(name, help).Get().Increment(amount);
}

}  // namespace sluice
