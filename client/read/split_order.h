// SplitOrder: the reorder buffer of a deterministic read (distribute's
// `deterministic: true`, issue 20). Every element of such a read carries
// its (split seq, position), and a split's elements come from its worker
// in position order; SplitOrder hands them on in split order: all of split
// 0, then all of split 1, and so on, whichever worker ran each split and
// however fast. A split's elements flow on as they arrive once it is the
// next one; later splits' elements wait until every split before theirs is
// complete. Splits a restored read had wholly delivered are passed over.
//
//   SplitOrder order(restored);
//   order.Add(seq, position, std::move(element));  // accepted, in position order
//   order.Complete(seq);                            // its worker sent its end
//   order.Release(&ready);                          // what may go to the trainer
//
// Not thread-safe: the reader guards it with its mutex.
#ifndef SLUICE_CLIENT_READ_SPLIT_ORDER_H_
#define SLUICE_CLIENT_READ_SPLIT_ORDER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <utility>

#include "client/read/split_deliveries.h"
#include "pipeline/dataset.h"
#include "sluice/element.h"

namespace sluice::reader {

class SplitOrder {
 public:
  struct Tagged {
    int64_t seq = 0;
    int64_t position = 0;
    Element element;
  };

  explicit SplitOrder(SplitDeliveries restored = {});
  SplitOrder(const SplitOrder&) = delete;
  SplitOrder& operator=(const SplitOrder&) = delete;

  // Whether an element of split `seq` may go out at once, past Add: its
  // split is the next one and none of its elements wait.
  bool PassesStraight(int64_t seq) const { return seq == next_seq_ && !pending_.contains(seq); }
  // An element of split `seq`, after every earlier position of that split.
  void Add(int64_t seq, int64_t position, Element element);
  // Every element of split `seq` was added.
  void Complete(int64_t seq);
  // Appends to `ready`, in order, the elements whose turn has come.
  void Release(std::deque<Tagged>* ready);
  // Appends everything still waiting, in split order: the read is over, so
  // no earlier split can come. Only a split that never came (which the
  // read reports as lost) leaves anything here.
  void ReleaseAll(std::deque<Tagged>* ready);

  // The split whose elements go next.
  int64_t next_seq() const { return next_seq_; }
  // Elements waiting for an earlier split.
  int64_t waiting() const { return waiting_; }

 private:
  struct Pending {
    std::deque<Tagged> elements;
    bool complete = false;
  };
  // Moves next_seq_ past splits delivered before a restore.
  void SkipRestored();

  const SplitDeliveries restored_;
  int64_t next_seq_ = kFirstSplitSeq;
  std::map<int64_t, Pending> pending_;
  // The entry Add extended last (pending_.end() if none): a split's
  // elements come together.
  std::map<int64_t, Pending>::iterator last_ = pending_.end();
  int64_t waiting_ = 0;
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_SPLIT_ORDER_H_
