#include "python/src/status.h"

#include <deque>
#include <string>
#include <utility>

namespace sluice::python {
namespace py = pybind11;
namespace {

PyObject* error_type = nullptr;  // sluice.Error, set once at import

// Exceptions raised by Python callables, with the text of the status each
// became; guarded by the GIL.
struct KeptError {
  std::string text;
  py::object exception;
};
std::deque<KeptError>& KeptErrors() {
  static auto* kept = new std::deque<KeptError>();
  return *kept;
}
constexpr size_t kMaxKeptErrors = 64;

// Raises a kept exception that `status` carries; returns when none.
void ThrowKeptError(const absl::Status& status) {
  std::deque<KeptError>& kept = KeptErrors();
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    if (status.message().find(it->text) == std::string_view::npos) continue;
    py::object exception = std::move(it->exception);
    kept.erase(std::next(it).base());
    if (py::hasattr(exception, "add_note")) exception.attr("add_note")(std::string(status.message()));
    // The user's own `code` (SystemExit's exit status, HTTPError's) stays.
    if (!py::hasattr(exception, "code")) {
      try {
        exception.attr("code") = absl::StatusCodeToString(status.code());
      } catch (py::error_already_set&) {
        // An exception type without attributes has none.
      }
    }
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
    throw py::error_already_set();
  }
}

PyObject* ExceptionType(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return PyExc_ValueError;
    case absl::StatusCode::kNotFound:
      return PyExc_FileNotFoundError;
    case absl::StatusCode::kOutOfRange:
      return PyExc_StopIteration;
    case absl::StatusCode::kUnavailable:
      return PyExc_ConnectionError;
    case absl::StatusCode::kDeadlineExceeded:
      return PyExc_TimeoutError;
    default:
      return error_type;
  }
}

}  // namespace

void RegisterErrors(py::module_& module) {
  static py::exception<std::exception> error(module, "Error");
  error.doc() =
      "A Sluice error without a closer Python exception. `.code` is the status code's name, such as "
      "'DATA_LOSS' or 'FAILED_PRECONDITION' (every exception Sluice raises has it).";
  error_type = error.ptr();
}

void KeepPythonError(const py::error_already_set& error, const std::string& text) {
  py::object exception = error.value();
  if (error.trace()) PyException_SetTraceback(exception.ptr(), error.trace().ptr());
  std::deque<KeptError>& kept = KeptErrors();
  kept.push_back({text, std::move(exception)});
  if (kept.size() > kMaxKeptErrors) kept.pop_front();
}

void ThrowStatus(const absl::Status& status) {
  ThrowKeptError(status);
  PyObject* type = ExceptionType(status.code());
  py::object exception = py::reinterpret_borrow<py::object>(type)(std::string(status.message()));
  exception.attr("code") = absl::StatusCodeToString(status.code());
  PyErr_SetObject(type, exception.ptr());
  throw py::error_already_set();
}

}  // namespace sluice::python
