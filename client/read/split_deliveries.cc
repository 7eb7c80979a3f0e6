#include "client/read/split_deliveries.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/int_ranges.h"

namespace sluice::reader {

absl::StatusOr<SplitDeliveries> SplitDeliveries::FromProto(const proto::ServiceReadState& state) {
  SplitDeliveries deliveries;
  absl::StatusOr<IntRanges> done = RangesFromPairs(state.done_splits(), 1, "service read state: done_splits");
  if (!done.ok()) return done.status();
  deliveries.done_ = *std::move(done);
  deliveries.split_layout_ = state.split_layout();
  deliveries.restore_key_ = state.restore_key();
  deliveries.restore_job_id_ = state.restore_job_id();
  absl::StatusOr<WorkerRanges> workers =
      WorkerRangesFromProto(state.worker_positions(), "service read state: worker_positions");
  if (!workers.ok()) return workers.status();
  deliveries.worker_positions_ = *std::move(workers);
  deliveries.last_worker_ = deliveries.worker_positions_.end();
  for (const proto::SplitDelivery& split : state.partial_splits()) {
    const std::string field = absl::StrCat("split ", split.seq());
    if (split.seq() < 1 || deliveries.partial_.contains(split.seq()) ||
        InRanges(deliveries.done_, split.seq())) {
      return absl::InvalidArgumentError(
          absl::StrCat("service read state: ", field, " is below 1, listed twice, or also done"));
    }
    absl::StatusOr<IntRanges> delivered =
        RangesFromPairs(split.delivered(), 0, "service read state: " + field);
    if (!delivered.ok()) return delivered.status();
    if (split.size() < -1 ||
        (split.size() >= 0 && !delivered->empty() && std::prev(delivered->end())->second > split.size())) {
      return absl::InvalidArgumentError(absl::StrCat("service read state: ", field, " has size ",
                                                     split.size(),
                                                     ", below -1 or below a position delivered"));
    }
    Partial& partial = deliveries.partial_[split.seq()];
    partial.delivered = *std::move(delivered);
    partial.size = split.size();
    deliveries.CompleteIfWhole(split.seq());
  }
  return deliveries;
}

proto::ServiceReadState SplitDeliveries::ToProto() const {
  proto::ServiceReadState state;
  AppendPairs(done_, state.mutable_done_splits());
  state.set_split_layout(split_layout_);
  state.set_restore_key(restore_key_);
  state.set_restore_job_id(restore_job_id_);
  AppendWorkerRanges(worker_positions_, state.mutable_worker_positions());
  for (const auto& [seq, partial] : partial_) {
    proto::SplitDelivery* split = state.add_partial_splits();
    split->set_seq(seq);
    AppendPairs(partial.delivered, split->mutable_delivered());
    split->set_size(partial.size);
  }
  return state;
}

void SplitDeliveries::Add(int64_t seq, int64_t position) {
  // The common case, once per element: the next position of the split the
  // last one came from.
  if (last_ != partial_.end() && last_->first == seq && !last_->second.delivered.empty()) {
    auto end = std::prev(last_->second.delivered.end());
    if (end->second == position) {
      ++end->second;
      if (last_->second.size >= 0) CompleteIfWhole(seq);
      return;
    }
  }
  if (InRanges(done_, seq)) return;
  last_ = partial_.try_emplace(seq).first;
  InsertRange(&last_->second.delivered, position, position + 1);
  CompleteIfWhole(seq);
}

void SplitDeliveries::AddWorkerPosition(const std::string& worker_address, int64_t position) {
  if (last_worker_ == worker_positions_.end() || last_worker_->first != worker_address) {
    last_worker_ = worker_positions_.try_emplace(worker_address).first;
  }
  IntRanges& ranges = last_worker_->second;
  // The common case: the next position of the worker's epoch.
  if (!ranges.empty() && std::prev(ranges.end())->second == position) {
    ++std::prev(ranges.end())->second;
    return;
  }
  InsertRange(&ranges, position, position + 1);
}

void SplitDeliveries::SetWorkerEnd(const std::string& worker_address, int64_t end) {
  InsertRange(&worker_positions_[worker_address], end, kEpochEnd);
}

void SplitDeliveries::SetSize(int64_t seq, int64_t size) {
  if (InRanges(done_, seq)) return;
  partial_[seq].size = size;
  CompleteIfWhole(seq);
}

void SplitDeliveries::Merge(const SplitDeliveries& other) {
  if (split_layout_.empty()) split_layout_ = other.split_layout_;
  if (restore_key_.empty()) restore_key_ = other.restore_key_;
  if (restore_job_id_ == 0) restore_job_id_ = other.restore_job_id_;
  for (const auto& [address, theirs] : other.worker_positions_) {
    IntRanges& ours = worker_positions_[address];
    for (const auto& [begin, end] : theirs) InsertRange(&ours, begin, end);
  }
  for (const auto& [begin, end] : other.done_) MarkDone(begin, end);
  for (const auto& [seq, theirs] : other.partial_) {
    if (InRanges(done_, seq)) continue;
    Partial& ours = partial_[seq];
    for (const auto& [begin, end] : theirs.delivered) InsertRange(&ours.delivered, begin, end);
    ours.size = std::max(ours.size, theirs.size);
    CompleteIfWhole(seq);
  }
}

bool SplitDeliveries::IsDone(int64_t seq) const { return InRanges(done_, seq); }

bool SplitDeliveries::Contains(int64_t seq, int64_t position) const {
  if (InRanges(done_, seq)) return true;
  auto partial = partial_.find(seq);
  return partial != partial_.end() && InRanges(partial->second.delivered, position);
}

int64_t SplitDeliveries::NextUndelivered(int64_t seq, int64_t position) const {
  auto partial = partial_.find(seq);
  if (partial == partial_.end()) return position;
  const IntRanges& delivered = partial->second.delivered;
  auto next = delivered.upper_bound(position);
  if (next != delivered.begin() && position < std::prev(next)->second) return std::prev(next)->second;
  return position;
}

std::vector<int64_t> SplitDeliveries::DoneSplitPairs() const {
  std::vector<int64_t> pairs;
  for (const auto& [begin, end] : done_) {
    pairs.push_back(begin);
    pairs.push_back(end);
  }
  return pairs;
}

int64_t SplitDeliveries::CountDoneSplits() const {
  int64_t count = 0;
  for (const auto& [begin, end] : done_) count += end - begin;
  return count;
}

void SplitDeliveries::CompleteIfWhole(int64_t seq) {
  auto partial = partial_.find(seq);
  if (partial == partial_.end() || partial->second.size < 0) return;
  const IntRanges& delivered = partial->second.delivered;
  const bool whole = partial->second.size == 0 || (delivered.size() == 1 && delivered.begin()->first == 0 &&
                                                   delivered.begin()->second >= partial->second.size);
  if (whole) MarkDone(seq, seq + 1);
}

void SplitDeliveries::MarkDone(int64_t begin, int64_t end) {
  InsertRange(&done_, begin, end);
  partial_.erase(partial_.lower_bound(begin), partial_.lower_bound(end));
  last_ = partial_.end();
}

}  // namespace sluice::reader
