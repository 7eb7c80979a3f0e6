// The public face of the process's metrics registry (service/metrics.h).
#include "sluice/metrics.h"

#include "client/read/trainer_wait.h"
#include "service/metrics.h"

namespace sluice {

std::string MetricsText() { return ProcessMetrics().Render(); }

void IncrementCounter(const std::string& name, const std::string& help, double amount) {
  ProcessMetrics().AddCounter(name, help).Get().Increment(amount);
}

void NoteTrainerWait(double seconds) {
  static Counter& waited = ProcessMetrics()
                               .AddCounter("sluice_client_trainer_wait_seconds_total",
                                           "time the trainer's loop waited for its next value (Python "
                                           "iterators, DistributedIterator)")
                               .Get();
  waited.Increment(seconds);
  reader::AddTrainerWait(seconds);
}

}  // namespace sluice
