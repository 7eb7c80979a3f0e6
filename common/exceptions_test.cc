// Tests of common/exceptions.h: what each exception becomes, and that a
// failure to describe one (memory exhausted) is still a ResourceExhausted
// Status, not a second throw from inside the handler.
#include "common/exceptions.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

#include "absl/status/statusor.h"

namespace sluice {
namespace {

template <typename Throw>
absl::Status Caught(absl::string_view where, Throw thrower) {
  try {
    thrower();
  } catch (...) {
    return StatusFromCurrentException(where);
  }
  return absl::OkStatus();
}

TEST_CASE("exceptions: each exception becomes a Status naming where it was caught", "[common][hardening]") {
  absl::Status status = Caught("step 3 (batch)", [] { throw std::bad_alloc(); });
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(status.message() == "step 3 (batch): out of memory (an allocation failed: std::bad_alloc)");
  CHECK(IsAllocationFailure(status));

  status = Caught("prefetch", [] { throw std::length_error("vector::reserve"); });
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(status.message() == "prefetch: asked for more memory than can be allocated (vector::reserve)");
  CHECK(IsAllocationFailure(status));

  status = Caught("prefetch", [] {
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), "thread");
  });
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  CHECK_FALSE(IsAllocationFailure(status));

  status = Caught("map(f)", [] { throw std::runtime_error("plugin bug"); });
  CHECK(status.code() == absl::StatusCode::kInternal);
  CHECK(status.message() == "map(f): threw an exception: plugin bug");
  CHECK_FALSE(IsAllocationFailure(status));

  status = Caught("map(f)", [] { throw 7; });
  CHECK(status.code() == absl::StatusCode::kInternal);
  CHECK(status.message() == "map(f): threw an exception that is not a std::exception");
}

TEST_CASE("exceptions: when describing the exception fails too, the answer is the start-up Status",
          "[common][hardening]") {
  // A `where` longer than any string: building the message throws (as an
  // allocation does with memory exhausted) before a byte of it is read.
  static const char kByte = 'x';
  const absl::string_view huge(&kByte, std::string().max_size());
  for (int kind = 0; kind < 3; ++kind) {
    INFO("kind " << kind);
    const absl::Status status = Caught(huge, [kind] {
      if (kind == 0) throw std::bad_alloc();
      if (kind == 1) throw std::runtime_error("boom");
      throw 7;
    });
    CHECK(status.code() == absl::StatusCode::kResourceExhausted);
    CHECK(status.message() == kOutOfMemoryMessage);
    CHECK(IsAllocationFailure(status));
  }
  // Copies of it share one representation: nothing to allocate.
  const absl::Status first = Caught(huge, [] { throw std::bad_alloc(); });
  const absl::Status second = Caught(huge, [] { throw std::bad_alloc(); });
  CHECK(first.message().data() == second.message().data());
}

TEST_CASE("exceptions: CallContained returns what fn throws as its Status or StatusOr",
          "[common][hardening]") {
  absl::Status status = CallContained("here", []() -> absl::Status { throw std::bad_alloc(); });
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  absl::StatusOr<int> value = CallContained("here", []() -> absl::StatusOr<int> { throw std::bad_alloc(); });
  CHECK(value.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(value.status().message() == "here: out of memory (an allocation failed: std::bad_alloc)");
  value = CallContained("here", []() -> absl::StatusOr<int> { return 3; });
  CHECK(*value == 3);
}

}  // namespace
}  // namespace sluice
