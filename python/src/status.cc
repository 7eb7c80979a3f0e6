#include "python/src/status.h"

#include <string>

namespace sluice::python {
namespace py = pybind11;
namespace {

PyObject* error_type = nullptr;  // sluice.Error, set once at import

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

void ThrowStatus(const absl::Status& status) {
  PyObject* type = ExceptionType(status.code());
  py::object exception = py::reinterpret_borrow<py::object>(type)(std::string(status.message()));
  exception.attr("code") = absl::StatusCodeToString(status.code());
  PyErr_SetObject(type, exception.ptr());
  throw py::error_already_set();
}

}  // namespace sluice::python
