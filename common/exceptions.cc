#include "common/exceptions.h"

#include <cerrno>
#include <exception>
#include <new>
#include <stdexcept>
#include <system_error>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

constexpr absl::string_view kAllocationFailure = "sluice.dev/allocation-failure";

absl::Status AllocationFailure(absl::string_view message) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kAllocationFailure, absl::Cord("1"));
  return status;
}

// The answer when even describing the exception fails: memory is gone, so
// this one was made while there was some, and copying a Status only counts
// a reference. Never destroyed, so a detached thread may copy it at exit.
const absl::Status& OutOfMemory() {
  static const absl::Status* const status = new absl::Status(AllocationFailure(kOutOfMemoryMessage));
  return *status;
}
// Made at load time, not at the first failure (when it could not be).
[[maybe_unused]] const absl::Status& out_of_memory_at_load = OutOfMemory();

// The exception being handled, described; may throw (std::bad_alloc) while
// building the message.
absl::Status Describe(absl::string_view where) {
  try {
    throw;
  } catch (const std::bad_alloc& e) {
    return AllocationFailure(absl::StrCat(where, ": out of memory (an allocation failed: ", e.what(), ")"));
  } catch (const std::length_error& e) {
    return AllocationFailure(
        absl::StrCat(where, ": asked for more memory than can be allocated (", e.what(), ")"));
  } catch (const std::system_error& e) {
    if (e.code() == std::errc::resource_unavailable_try_again) {
      return absl::ResourceExhaustedError(absl::StrCat(where, ": cannot start a thread (", e.what(), ")"));
    }
    return absl::InternalError(absl::StrCat(where, ": threw std::system_error: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(where, ": threw an exception: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(where, ": threw an exception that is not a std::exception"));
  }
}

}  // namespace

absl::Status StatusFromCurrentException(absl::string_view where) noexcept {
  try {
    return Describe(where);
  } catch (...) {
    // The message could not be allocated: the process is at its memory
    // limit. Throwing on from here would end it (std::terminate on a
    // thread), taking every task with it.
    return OutOfMemory();
  }
}

bool IsAllocationFailure(const absl::Status& status) {
  return status.GetPayload(kAllocationFailure).has_value();
}

}  // namespace sluice
