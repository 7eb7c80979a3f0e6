// absl::Status as Python exceptions: InvalidArgument is ValueError,
// NotFound FileNotFoundError, OutOfRange StopIteration, Unavailable
// ConnectionError, DeadlineExceeded TimeoutError, and any other code
// sluice.Error. Every exception carries the status code's name as `.code`
// ("INVALID_ARGUMENT", ...) and the status message as its text.
#ifndef SLUICE_PYTHON_SRC_STATUS_H_
#define SLUICE_PYTHON_SRC_STATUS_H_

#include <pybind11/pybind11.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::python {

// Adds sluice.Error to `module`; call once, first.
void RegisterErrors(pybind11::module_& module);

// Raises `status` (not OK) as its Python exception.
[[noreturn]] void ThrowStatus(const absl::Status& status);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) ThrowStatus(value.status());
  return *std::move(value);
}

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_STATUS_H_
