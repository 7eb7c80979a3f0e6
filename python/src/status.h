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

// Raises `status` (not OK) as its Python exception. A status that carries
// an exception a Python callable raised (KeepPythonError) raises that
// exception itself, its traceback kept, with Sluice's message as a note.
[[noreturn]] void ThrowStatus(const absl::Status& status);

// Keeps `error` (raised by a callable that the engine ran), which a status
// whose message contains `text` raises again; call with the GIL held. The
// last 64 are kept: the statuses that carry them may be wrapped in context
// along the pipeline, so they are found by their text.
void KeepPythonError(const pybind11::error_already_set& error, const std::string& text);

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
