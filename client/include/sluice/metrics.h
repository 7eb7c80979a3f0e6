// This process's metrics, for a trainer to read or export: the client's
// wait time and bytes received, the process's CPU and memory, and counters
// a trainer adds (as sluice.torch does); and the trainer's own wait, which
// a loop that reads ahead reports (NoteTrainerWait).
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

// For a loop that reads a dataset ahead of the trainer on a thread of its
// own (the Python iterators and DistributedIterator call it): `seconds`
// the trainer itself waited for its next value. From the first call on,
// this process's service reads report the trainer's wait to the
// dispatcher's autoscaling rather than the reading thread's, which waits
// whenever the trainer could take more. Counted in
// sluice_client_trainer_wait_seconds_total.
void NoteTrainerWait(double seconds);

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_METRICS_H_
