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
#ifndef SLUICE_CLIENT_READ_SPLIT_POSITION_FILTER_H_
#define SLUICE_CLIENT_READ_SPLIT_POSITION_FILTER_H_

#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "client/read/split_deliveries.h"
#include "service/int_ranges.h"

namespace sluice::reader {

// Consumers of a shared (named) job split each split's elements between
// them, so one reader's positions jump by design; such a reader cannot
// tell a gap from another consumer's share. It keeps the positions it took
// and drops exactly those when they come again. When a shared read loses a
// task, the dispatcher holds its splits until every consumer has said
// which of their positions it took (Taken), and their rerun passes over
// those (dispatcher_state.h, HoldsLostSplits): every position of the rerun
// is then one nobody delivered, also one that was in flight when the
// worker died.
//
// A restored read (issue 20) starts with what was delivered before its
// save: those positions are repeats too, and a sole reader's next position
// steps over them.
class SplitPositionFilter {
 public:
  explicit SplitPositionFilter(bool sole_reader, SplitDeliveries restored = {})
      : sole_reader_(sole_reader), restored_(std::move(restored)) {}

  // Whether to deliver the element at `position` of split `seq`: for a sole
  // reader only the next position not yet delivered, for a shared one any
  // it has not delivered.
  bool Accept(int64_t seq, int64_t position) {
    const bool restored = !restored_.empty();
    if (restored && restored_.Contains(seq, position)) return false;
    if (!sole_reader_) return AcceptShared(seq, position);
    auto [entry, fresh] = next_position_.try_emplace(seq, 0);
    int64_t& next = entry->second;
    if (fresh && restored) next = restored_.NextUndelivered(seq, 0);
    if (position == next) {
      next = restored ? restored_.NextUndelivered(seq, position + 1) : position + 1;
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

  // A shared reader's positions taken of the splits in `seqs`, as many
  // splits as fit in `max_numbers` numbers (1 + 2 per range each; `*cut`
  // says whether some did not): what a shared read lost a task of reports,
  // so that the rerun passes over them (dispatcher_state.h,
  // HoldsLostSplits).
  std::vector<std::pair<int64_t, IntRanges>> Taken(const IntRanges& seqs, int64_t max_numbers,
                                                   bool* cut) const {
    std::vector<std::pair<int64_t, IntRanges>> taken;
    *cut = false;
    for (const auto& [begin, end] : seqs) {
      for (auto it = taken_.lower_bound(begin); it != taken_.end() && it->first < end; ++it) {
        const int64_t numbers = 1 + 2 * static_cast<int64_t>(it->second.size());
        if (numbers > max_numbers) {
          *cut = true;
          return taken;
        }
        max_numbers -= numbers;
        taken.push_back(*it);
      }
    }
    return taken;
  }
  // Split `seq` is complete and the dispatcher knows it, or every split
  // below `seq` is (ForgetBelow): never run again, so their positions need
  // no keeping.
  void Forget(int64_t seq) { taken_.erase(seq); }
  void ForgetBelow(int64_t seq) { taken_.erase(taken_.begin(), taken_.lower_bound(seq)); }

 private:
  bool AcceptShared(int64_t seq, int64_t position) {
    IntRanges& taken = taken_[seq];
    // The common case: the position after the last range, which grows in
    // place.
    if (!taken.empty() && std::prev(taken.end())->second == position) {
      ++std::prev(taken.end())->second;
      return true;
    }
    if (InRanges(taken, position)) return false;
    InsertRange(&taken, position, position + 1);
    return true;
  }

  const bool sole_reader_;
  const SplitDeliveries restored_;
  // A sole reader's next position per split.
  std::map<int64_t, int64_t> next_position_;
  std::set<int64_t> gapped_;
  // A shared reader's positions taken per split.
  std::map<int64_t, IntRanges> taken_;
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_SPLIT_POSITION_FILTER_H_
