// RequestSizing: how many elements a data-service reader asks a worker for
// in one request. The reader's budget (max_outstanding) bounds the elements
// buffered, held for reordering and requested together; within it, a
// request is sized so that its response comes to about
// kTargetResponseBytes, judged from the elements received so far.
//
//   RequestSizing sizing(/*max_outstanding=*/64);
//   if (sizing.WorthAsking(room)) want = sizing.ElementsToAsk(room);
//   ...
//   for (const Element& e : response.elements) sizing.Observe(e.ByteSize());
//
// Not thread-safe: the reader guards it with its mutex.
#ifndef SLUICE_CLIENT_READ_REQUEST_SIZING_H_
#define SLUICE_CLIENT_READ_REQUEST_SIZING_H_

#include <cstdint>

namespace sluice::reader {

// Elements asked of a worker in one request, at most.
inline constexpr int64_t kMaxElementsPerRequest = 1024;
// Requests ask for about this many bytes, so that a response is decoded
// while its bytes are still in the CPU's cache. With 1 MiB elements, 4 MiB
// responses ran at 2.5 GB/s, 16 MiB ones at 1.9 GB/s and 1 MiB ones at
// 2.0 GB/s (bench/README.md).
inline constexpr int64_t kTargetResponseBytes = 4 << 20;

class RequestSizing {
 public:
  // `max_outstanding`: the reader's budget of elements, at least 1.
  explicit RequestSizing(int64_t max_outstanding);

  // Whether `room` (the budget's free elements) is worth a request: at
  // least half a request's share. Asking as soon as one element's room
  // frees up would make many tiny requests, a round trip each (TCP's silly
  // window syndrome).
  bool WorthAsking(int64_t room) const { return room >= min_request_; }
  // Elements to ask for with `room` free: no more than the room, one
  // request's share, kMaxElementsPerRequest or ElementsForTargetBytes().
  int64_t ElementsToAsk(int64_t room) const;

  // The reader's budget changed (an adaptive one, read_state.h).
  void SetBudget(int64_t max_outstanding);

  // Counts one received element of `bytes` bytes towards the average.
  void Observe(int64_t bytes);
  // The average size of the elements counted; 0 before any.
  int64_t AverageBytes() const;
  // Elements of the average size that make kTargetResponseBytes; 1 until
  // an element was seen, since the first response measures.
  int64_t ElementsForTargetBytes() const;

  int64_t request_share() const { return request_share_; }
  int64_t min_request() const { return min_request_; }

 private:
  // Each request takes up to half the budget, so that two can be out at
  // once whatever the element size; the byte target keeps large elements
  // to smaller requests, of which all of a task's kRequestsInFlightPerTask
  // (task_reader.h) can be out...
  int64_t request_share_;
  // ...and waits until at least this much of it is free.
  int64_t min_request_;
  // A running sum of the elements received and their bytes; halved now
  // and then so that the average follows changes.
  int64_t elements_received_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_REQUEST_SIZING_H_
