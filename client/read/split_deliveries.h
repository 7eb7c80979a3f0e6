// SplitDeliveries: which elements of a distributed_epoch epoch a reader has
// delivered, named by (split seq, position in the split's output), as an
// exactly_once job tags them. It is what a saved service read records
// (issue 20): a restore skips the splits wholly delivered and drops the
// delivered positions of the others when their splits are run again.
// Several consumers' deliveries merge by union into a job checkpoint.
//
//   SplitDeliveries delivered;
//   delivered.Add(/*seq=*/3, /*position=*/0);
//   delivered.SetSize(3, 1);            // split 3 is now wholly delivered
//   proto::ServiceReadState saved = delivered.ToProto();
#ifndef SLUICE_CLIENT_READ_SPLIT_DELIVERIES_H_
#define SLUICE_CLIENT_READ_SPLIT_DELIVERIES_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "service/int_ranges.h"
#include "service/worker_positions.h"
#include "sluice/proto/checkpoint.pb.h"

namespace sluice::reader {

class SplitDeliveries {
 public:
  SplitDeliveries() = default;
  // Copies and moves forget which split Add and which worker
  // AddWorkerPosition extended last.
  SplitDeliveries(const SplitDeliveries& other)
      : done_(other.done_),
        partial_(other.partial_),
        split_layout_(other.split_layout_),
        restore_key_(other.restore_key_),
        restore_job_id_(other.restore_job_id_),
        worker_positions_(other.worker_positions_) {}
  SplitDeliveries(SplitDeliveries&& other) noexcept
      : done_(std::move(other.done_)),
        partial_(std::move(other.partial_)),
        split_layout_(std::move(other.split_layout_)),
        restore_key_(std::move(other.restore_key_)),
        restore_job_id_(other.restore_job_id_),
        worker_positions_(std::move(other.worker_positions_)) {
    other.last_ = other.partial_.end();
    other.last_worker_ = other.worker_positions_.end();
  }
  SplitDeliveries& operator=(const SplitDeliveries& other) {
    if (this != &other) *this = SplitDeliveries(other);
    return *this;
  }
  SplitDeliveries& operator=(SplitDeliveries&& other) noexcept {
    done_ = std::move(other.done_);
    partial_ = std::move(other.partial_);
    split_layout_ = std::move(other.split_layout_);
    restore_key_ = std::move(other.restore_key_);
    restore_job_id_ = other.restore_job_id_;
    worker_positions_ = std::move(other.worker_positions_);
    last_ = partial_.end();
    last_worker_ = worker_positions_.end();
    other.last_ = other.partial_.end();
    other.last_worker_ = other.worker_positions_.end();
    return *this;
  }

  // InvalidArgument naming the field when the state is malformed (ranges
  // out of order or overlapping, a split both done and partial).
  static absl::StatusOr<SplitDeliveries> FromProto(const proto::ServiceReadState& state);
  proto::ServiceReadState ToProto() const;

  // Position `position` of split `seq` was delivered.
  void Add(int64_t seq, int64_t position);
  // Split `seq` produced `size` elements (its worker said so).
  void SetSize(int64_t seq, int64_t size);
  // Adds everything `other` delivered; a split either delivered whole is.
  void Merge(const SplitDeliveries& other);

  // parallel_epochs: position `position` of `worker_address`'s epoch.
  void AddWorkerPosition(const std::string& worker_address, int64_t position);
  // `worker_address`'s epoch ended at `end`: no position from there on is
  // left to deliver.
  void SetWorkerEnd(const std::string& worker_address, int64_t end);
  // Lists `worker_address` (with no positions, if it had none).
  void AddWorker(const std::string& worker_address) { worker_positions_.try_emplace(worker_address); }
  const WorkerRanges& worker_positions() const { return worker_positions_; }

  bool empty() const { return done_.empty() && partial_.empty() && worker_positions_.empty(); }
  bool Contains(int64_t seq, int64_t position) const;
  // Split `seq` was delivered whole.
  bool IsDone(int64_t seq) const;
  // The first position at or after `position` of split `seq` not delivered.
  int64_t NextUndelivered(int64_t seq, int64_t position) const;
  // The splits wholly delivered, as [begin, end) pairs of seqs.
  std::vector<int64_t> DoneSplitPairs() const;
  // The dispatcher's split layout the seqs refer to ("" until known).
  const std::string& split_layout() const { return split_layout_; }
  void set_split_layout(std::string layout) { split_layout_ = std::move(layout); }
  // The dispatcher's proof for a restore of this read ("" without auth).
  const std::string& restore_key() const { return restore_key_; }
  void set_restore_key(std::string key) { restore_key_ = std::move(key); }
  // An anonymous job's id, which its restore_key names (0: a named job, or
  // not known).
  int64_t restore_job_id() const { return restore_job_id_; }
  void set_restore_job_id(int64_t id) { restore_job_id_ = id; }

  // How many splits are done, and how many delivered in part.
  int64_t CountDoneSplits() const;
  int64_t CountPartialSplits() const { return static_cast<int64_t>(partial_.size()); }

 private:
  struct Partial {
    IntRanges delivered;  // positions
    int64_t size = -1;    // unknown
  };
  // Moves `seq` to done_ when it is wholly delivered.
  void CompleteIfWhole(int64_t seq);
  void MarkDone(int64_t begin, int64_t end);

  IntRanges done_;  // seqs
  std::map<int64_t, Partial> partial_;
  // The split Add last extended (partial_.end() if none): elements come a
  // split at a time.
  std::map<int64_t, Partial>::iterator last_ = partial_.end();
  std::string split_layout_;
  std::string restore_key_;
  int64_t restore_job_id_ = 0;
  WorkerRanges worker_positions_;
  // The worker AddWorkerPosition extended last (worker_positions_.end() if
  // none): a reader takes runs of elements from one task.
  WorkerRanges::iterator last_worker_ = worker_positions_.end();
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_SPLIT_DELIVERIES_H_
