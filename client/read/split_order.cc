#include "client/read/split_order.h"

#include <utility>

namespace sluice::reader {

SplitOrder::SplitOrder(SplitDeliveries restored) : restored_(std::move(restored)) { SkipRestored(); }

void SplitOrder::SkipRestored() {
  while (restored_.IsDone(next_seq_)) ++next_seq_;
}

void SplitOrder::Add(int64_t seq, int64_t position, Element element) {
  if (last_ == pending_.end() || last_->first != seq) last_ = pending_.try_emplace(seq).first;
  last_->second.elements.push_back({seq, position, std::move(element)});
  ++waiting_;
}

void SplitOrder::Complete(int64_t seq) {
  // A split passed already (a rerun reported complete again) adds nothing.
  if (seq < next_seq_) return;
  pending_[seq].complete = true;
}

void SplitOrder::Release(std::deque<Tagged>* ready) {
  while (!pending_.empty()) {
    auto next = pending_.begin();
    // Splits before next_seq_ were complete when it moved past them: a
    // late repeat of one has nothing to add (the filter drops those).
    if (next->first < next_seq_) {
      waiting_ -= static_cast<int64_t>(next->second.elements.size());
      if (last_ == next) last_ = pending_.end();
      pending_.erase(next);
      continue;
    }
    if (next->first != next_seq_) return;
    Pending& split = next->second;
    waiting_ -= static_cast<int64_t>(split.elements.size());
    for (Tagged& tagged : split.elements) ready->push_back(std::move(tagged));
    split.elements.clear();
    if (!split.complete) return;
    if (last_ == next) last_ = pending_.end();
    pending_.erase(next);
    ++next_seq_;
    SkipRestored();
  }
}

void SplitOrder::ReleaseAll(std::deque<Tagged>* ready) {
  Release(ready);
  for (auto& [seq, split] : pending_) {
    for (Tagged& tagged : split.elements) ready->push_back(std::move(tagged));
  }
  pending_.clear();
  last_ = pending_.end();
  waiting_ = 0;
}

}  // namespace sluice::reader
