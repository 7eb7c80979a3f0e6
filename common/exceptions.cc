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

absl::Status AllocationFailure(std::string message) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kAllocationFailure, absl::Cord("1"));
  return status;
}

}  // namespace

absl::Status StatusFromCurrentException(absl::string_view where) {
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

bool IsAllocationFailure(const absl::Status& status) {
  return status.GetPayload(kAllocationFailure).has_value();
}

}  // namespace sluice
