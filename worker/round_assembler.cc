#include "worker/round_assembler.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "common/element_cost.h"
#include "service/element_wire.h"
#include "worker/request_checks.h"

namespace sluice::worker {

void RoundAssembler::Wait(int64_t round, int64_t consumer, bool others_past_round,
                          proto::WireCompression compression, absl::Time deadline, ElementsCallback done) {
  Round& r = rounds_[round];
  r.others_past |= others_past_round;
  r.waiters.push_back({consumer, compression, deadline, std::move(done)});
}

bool RoundAssembler::AllWaiting(const Round& round) const {
  std::set<int64_t> waiting;
  for (const RoundWaiter& waiter : round.waiters) waiting.insert(waiter.consumer);
  return waiting.size() == num_consumers_;
}

RoundAssembler::Taken RoundAssembler::Assemble(std::deque<Element>* buffer, bool ended,
                                               const absl::Status& status, Answers* answers) {
  const size_t n = num_consumers_;
  Taken taken;
  for (auto& [index, round] : rounds_) {
    if (!round.assembled && (round.others_past || AllWaiting(round)) && buffer->size() >= n) {
      for (size_t i = 0; i < n; ++i) {
        taken.bytes += ElementCost(buffer->front());
        round.elements.push_back(std::move(buffer->front()));
        buffer->pop_front();
      }
      taken.elements += static_cast<int64_t>(n);
      round.assembled = true;
      ++assembled_rounds_;
    }
    const bool failed = !round.assembled && ended && buffer->size() < n;
    if (!round.assembled && !failed) continue;
    for (RoundWaiter& waiter : round.waiters)
      answers->emplace_back(std::move(waiter.done), Answer(index, round, waiter, status));
    round.waiters.clear();
  }
  // Forgets the oldest rounds, assembled or abandoned, beyond what is kept.
  while (rounds_.size() > kKeptRounds && rounds_.begin()->second.waiters.empty())
    rounds_.erase(rounds_.begin());
  return taken;
}

RoundAssembler::ElementsReply RoundAssembler::Answer(int64_t index, const Round& round,
                                                     const RoundWaiter& waiter,
                                                     const absl::Status& status) const {
  ElementsReply reply;
  reply.compression = waiter.compression;
  if (round.assembled) {
    const Element& element = round.elements[waiter.consumer];
    if (const auto bytes = static_cast<int64_t>(ElementWireBound(element)); bytes > kMaxResponseBytes) {
      reply.status = ElementTooLarge(
          task_id_, absl::StrCat("round ", index, "'s element for consumer ", waiter.consumer), bytes);
    } else {
      reply.elements.push_back(element);  // shares the tensors' buffers
    }
  } else if (!status.ok()) {
    reply.status = status;
  } else {
    reply.end_of_sequence = true;
  }
  return reply;
}

void RoundAssembler::Expire(absl::Time now, Answers* expired) {
  for (auto& [index, round] : rounds_) {
    for (auto it = round.waiters.begin(); it != round.waiters.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      ElementsReply reply;
      reply.compression = it->compression;
      expired->emplace_back(std::move(it->done), std::move(reply));
      it = round.waiters.erase(it);
    }
  }
}

}  // namespace sluice::worker
