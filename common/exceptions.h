// Exceptions made Statuses, at the edges where pipeline code runs: an
// iterator's GetNext, a pool thread, a producer thread, a worker's task.
// Nothing in Sluice throws on purpose, but allocations, the standard
// library and plugins' functions may; one element must not take the
// process down (std::terminate) when its read can fail instead.
//
//   absl::Status status = CallContained("step 3 (batch)", [&] { return it->GetNext(&e, &end); });
#ifndef SLUICE_COMMON_EXCEPTIONS_H_
#define SLUICE_COMMON_EXCEPTIONS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// The exception being handled, as a Status whose message starts with
// `where`: ResourceExhausted for a failed allocation (std::bad_alloc), a
// size past what can be allocated (std::length_error) and a thread that
// cannot be started; Internal with what() for anything else. Call it only
// inside a catch block.
//
// Never throws, even with memory exhausted: when the message cannot be
// allocated, the answer is a Status made at start-up, ResourceExhausted
// with kOutOfMemoryMessage (an allocation failure, without `where`).
absl::Status StatusFromCurrentException(absl::string_view where) noexcept;

// The message of that start-up Status.
inline constexpr absl::string_view kOutOfMemoryMessage =
    "out of memory: an allocation failed, and so did describing where (the process is at its memory limit)";

// Whether `status` came from a failed allocation (std::bad_alloc or
// std::length_error made a Status above), for callers that add what limits
// memory ("the worker's max_memory_bytes is ..."). Survives copies, not a
// rewrite of the message.
bool IsAllocationFailure(const absl::Status& status);

// fn(), which returns an absl::Status or absl::StatusOr, with what it
// throws made its result.
template <typename Fn>
auto CallContained(absl::string_view where, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (...) {
    return StatusFromCurrentException(where);
  }
}

}  // namespace sluice

#endif  // SLUICE_COMMON_EXCEPTIONS_H_
