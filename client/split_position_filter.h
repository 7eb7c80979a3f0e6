// SplitPositionFilter: how an exactly_once reader drops repeats without
// ever dropping an element it has not had.
//
// Every element of an exactly_once task carries (split seq, position in
// that split's output), and a split's elements leave its worker in order.
// A split that a lost worker had begun is run again from its start, so its
// first positions come again and must be dropped. But a response can also
// be lost in transit (its worker killed with it in flight) while a later
// one, held behind it, arrives: that leaves a gap. Positions past a gap are
// not delivered, and the split is not reported complete, so its lease
// survives, the split is run again when the worker is found lost, and the
// rerun fills the gap in order.
#ifndef SLUICE_CLIENT_SPLIT_POSITION_FILTER_H_
#define SLUICE_CLIENT_SPLIT_POSITION_FILTER_H_

#include <cstdint>
#include <map>
#include <set>

namespace sluice {

class SplitPositionFilter {
 public:
  // Whether to deliver the element at `position` of split `seq`: only the
  // next position not yet delivered.
  bool Accept(int64_t seq, int64_t position) {
    int64_t& next = next_position_[seq];
    if (position == next) {
      ++next;
      gapped_.erase(seq);
      return true;
    }
    if (position > next) gapped_.insert(seq);
    return false;
  }
  // Whether the worker's word that `seq` is complete can be passed on:
  // every position up to its end was delivered.
  bool CompleteInOrder(int64_t seq) const { return !gapped_.contains(seq); }
  // Splits with a gap, which only a rerun can fill.
  const std::set<int64_t>& gapped() const { return gapped_; }

 private:
  std::map<int64_t, int64_t> next_position_;
  std::set<int64_t> gapped_;
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_SPLIT_POSITION_FILTER_H_
