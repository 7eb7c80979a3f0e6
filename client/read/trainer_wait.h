// The trainer's own wait for elements, where a layer above the service
// reads measures it: sluice::NoteTrainerWait (sluice/metrics.h), which the
// Python iterators and DistributedIterator call. Those layers read ahead of
// the trainer on threads of their own, so a service read's GetNext is
// called by a thread that waits whenever the trainer could take more: its
// own wait says that the trainer waits, not how long. A read therefore
// reports the smaller of its own wait and the trainer's
// (ReadState::ReportedWait) to the dispatcher's autoscaling
// (docs/design.md, "Autoscaling"). Process-wide; thread-safe.
#ifndef SLUICE_CLIENT_READ_TRAINER_WAIT_H_
#define SLUICE_CLIENT_READ_TRAINER_WAIT_H_

#include <optional>

namespace sluice::reader {

// Adds `seconds` (>= 0) the trainer waited; from the first call on, the
// process's reads count the trainer's wait.
void AddTrainerWait(double seconds);

// The trainer's seconds waited so far in this process; none while no
// layer measures them.
std::optional<double> TrainerWaitSeconds();

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_TRAINER_WAIT_H_
