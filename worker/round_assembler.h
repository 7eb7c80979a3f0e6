// RoundAssembler: the coordinated-read half of a task (num_consumers > 0).
// Each consumer asks for its element of round r; the round is assembled,
// from the next num_consumers elements of the task's buffer (consumer c
// gets the c-th), once every consumer is waiting for it here, or once one
// says another consumer already has its element of the round
// (others_past_round: their worker was lost). Assembled rounds are kept,
// so that a consumer whose answer was lost and that asks again gets the
// same element. A pipeline that ends with too few elements for a round
// answers its waiters with the end (or the pipeline's error).
//
//   RoundAssembler rounds(task_id, /*num_consumers=*/3);
//   rounds.Wait(0, /*consumer=*/1, false, compression, deadline, done);
//   RoundAssembler::Answers answers;
//   rounds.Assemble(&buffer, ended, status, &answers);
//   // ...release the lock, then call each answer's callback.
//
// Not thread-safe: the owning task calls it under its own mutex, and
// calls the answers' callbacks after releasing it.
#ifndef SLUICE_WORKER_ROUND_ASSEMBLER_H_
#define SLUICE_WORKER_ROUND_ASSEMBLER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sluice/element.h"
#include "sluice/proto/service.pb.h"
#include "worker/worker_impl.h"

namespace sluice::worker {

class RoundAssembler {
 public:
  using ElementsReply = WorkerImpl::ElementsReply;
  using ElementsCallback = WorkerImpl::ElementsCallback;
  // Requests answered while the owner's lock is held, for the owner to
  // call once it is released.
  using Answers = std::vector<std::pair<ElementsCallback, ElementsReply>>;

  // Assembled rounds kept for consumers that ask again (a lost answer).
  static constexpr size_t kKeptRounds = 256;

  // `task_id` names the task in errors.
  RoundAssembler(int64_t task_id, int64_t num_consumers)
      : task_id_(task_id), num_consumers_(static_cast<size_t>(num_consumers)) {}

  // Parks `consumer`'s request for `round` until the round is assembled or
  // `deadline` passes. The caller has checked that 0 <= consumer <
  // num_consumers. Assemble decides whether the request can be answered.
  void Wait(int64_t round, int64_t consumer, bool others_past_round, proto::WireCompression compression,
            absl::Time deadline, ElementsCallback done);

  // What Assemble took from the buffer, for the owner's counts.
  struct Taken {
    int64_t elements = 0;
    int64_t bytes = 0;  // Element::ByteSize, as the buffer counts
  };

  // Assembles, in round order, every round that all consumers wait for
  // (or that a consumer marked as passed by others) while `buffer` has
  // num_consumers elements, taking them from its front, and answers the
  // requests of assembled rounds into `answers`. Once the pipeline has
  // `ended` (with `status`), a round that cannot be assembled any more is
  // answered with that error, or with the end of the sequence.
  Taken Assemble(std::deque<Element>* buffer, bool ended, const absl::Status& status, Answers* answers);

  // Answers, empty, the parked requests whose deadline is not after `now`.
  void Expire(absl::Time now, Answers* expired);

  // Whether any round is parked or kept (the owner assembles on new
  // elements only then).
  bool has_rounds() const { return !rounds_.empty(); }
  int64_t assembled_rounds() const { return assembled_rounds_; }

 private:
  struct RoundWaiter {
    int64_t consumer;
    proto::WireCompression compression;
    absl::Time deadline;
    ElementsCallback done;
  };
  struct Round {
    std::vector<Element> elements;  // one per consumer, once assembled
    bool assembled = false;
    // A consumer has its element of this round from another worker.
    bool others_past = false;
    std::vector<RoundWaiter> waiters;
  };

  // Whether every consumer is waiting for `round` now. Only waiting ones
  // count: one whose request ran out may ask another worker next (its task
  // list changed), and a round assembled without it here would never reach
  // it.
  bool AllWaiting(const Round& round) const;

  // The answer to `waiter` of round `index`, assembled or not assembled
  // and never to be (the pipeline ended with `status`).
  ElementsReply Answer(int64_t index, const Round& round, const RoundWaiter& waiter,
                       const absl::Status& status) const;

  const int64_t task_id_;
  const size_t num_consumers_;
  std::map<int64_t, Round> rounds_;
  int64_t assembled_rounds_ = 0;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_ROUND_ASSEMBLER_H_
