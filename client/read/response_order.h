// ResponseOrder: puts one task's responses back in the task's order. A
// reader keeps several requests to a task in flight, and they may come
// back in any order. Each request gets a stamp when sent; a response waits
// (by its first_index) while a request sent before it arrived is still
// out, since only such a request can hold earlier elements, unless it
// starts where the responses given out so far end: then nothing can come
// before it. (A reader sharing a job sees gaps where other consumers took
// elements; its responses after a gap wait as above.)
//
//   const int64_t stamp = order.Send();
//   ... the request travels, unlocked ...
//   order.Returned(stamp);
//   if (has_elements_or_completed_splits) order.Hold(std::move(response));
//   while (std::optional<ResponseOrder::Ready> ready = order.PopReady()) ...
//
// Not thread-safe: the reader guards it with its mutex.
#ifndef SLUICE_CLIENT_READ_RESPONSE_ORDER_H_
#define SLUICE_CLIENT_READ_RESPONSE_ORDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "service/element_wire.h"
#include "sluice/element.h"

namespace sluice::reader {

class ResponseOrder {
 public:
  // A response whose turn has come.
  struct Ready {
    int64_t first_index = 0;
    std::vector<Element> elements;
    SplitTags tags;
  };

  // A request is about to go out; returns its stamp.
  int64_t Send();
  // The request `stamp` is no longer out: answered, failed or empty.
  void Returned(int64_t stamp);
  // Holds `response` until its turn. An empty response that reports splits
  // complete shares its first_index with the next one that has elements:
  // they merge, in the worker's order. A worker hands out each index once,
  // so elements at indices already given out or held are DataLoss naming
  // both ranges (and the response is dropped).
  absl::Status Hold(ElementsResponse response);
  // Takes out the first held response that no request still out can
  // precede; nullopt when there is none.
  std::optional<Ready> PopReady();

  // Requests sent so far.
  int64_t sent() const { return sent_; }
  // No request out and no response held.
  bool idle() const { return in_flight_.empty() && held_.empty(); }

 private:
  struct Held {
    // Requests sent when (the last part of) this response arrived.
    int64_t sent_before_arrival = 0;
    std::vector<Element> elements;
    SplitTags tags;
  };

  int64_t sent_ = 0;
  // Where the responses given out so far end, in the task's numbering.
  int64_t next_index_ = 0;
  std::set<int64_t> in_flight_;
  std::map<int64_t, Held> held_;  // by first_index
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_RESPONSE_ORDER_H_
