#include "python/src/callables.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "python/src/status.h"
#include "python/src/values.h"

namespace sluice::python {
namespace py = pybind11;
namespace {

// Holds a reference to a callable and drops it under the GIL, from
// whichever thread drops the last copy of the function; at interpreter
// exit it is left alone, as Python may no longer take the GIL then.
class CallableRef {
 public:
  explicit CallableRef(py::function fn) : name_(Describe(fn)), fn_(fn.release().ptr()) {}
  CallableRef(const CallableRef&) = delete;
  CallableRef& operator=(const CallableRef&) = delete;
  ~CallableRef() {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(fn_);
  }

  py::handle fn() const { return fn_; }
  const std::string& name() const { return name_; }

 private:
  static std::string Describe(const py::function& fn) {
    if (py::hasattr(fn, "__qualname__")) return py::str(fn.attr("__qualname__"));
    return py::str(py::repr(fn));
  }

  const std::string name_;
  PyObject* const fn_;
};

absl::StatusCode CodeOfPythonError(const py::error_already_set& error) {
  if (error.matches(PyExc_ValueError) || error.matches(PyExc_TypeError) || error.matches(PyExc_KeyError) ||
      error.matches(PyExc_IndexError)) {
    return absl::StatusCode::kInvalidArgument;
  }
  if (error.matches(PyExc_FileNotFoundError)) return absl::StatusCode::kNotFound;
  if (error.matches(PyExc_KeyboardInterrupt)) return absl::StatusCode::kCancelled;
  return absl::StatusCode::kUnknown;
}

// Runs `call` under the GIL; a Python exception becomes a status that
// names the callable and keeps the exception's type and message.
template <typename Result, typename Call>
absl::StatusOr<Result> CallPython(const CallableRef& callable, const char* op, Call&& call) {
  py::gil_scoped_acquire gil;
  try {
    return call();
  } catch (py::error_already_set& error) {
    std::string text = absl::StrCat(op, "(", callable.name(), ") raised ", error.what());
    KeepPythonError(error, text);
    return absl::Status(CodeOfPythonError(error), std::move(text));
  } catch (const std::exception& error) {
    return absl::UnknownError(absl::StrCat(op, "(", callable.name(), ") failed: ", error.what()));
  }
}

}  // namespace

LocalMapFunction MapFunctionFromPython(py::function fn) {
  auto callable = std::make_shared<const CallableRef>(std::move(fn));
  return [callable](const Element& input) -> absl::StatusOr<Element> {
    return CallPython<Element>(*callable, "map", [&] {
      py::object output = callable->fn()(ElementToPython(input));
      Components components = ComponentsFromPython(output);
      ComponentNames names;
      if (!components.names.empty())
        names = std::make_shared<const std::vector<std::string>>(std::move(components.names));
      return Element(std::move(components.tensors), std::move(names));
    });
  };
}

LocalPredicate PredicateFromPython(py::function fn) {
  auto callable = std::make_shared<const CallableRef>(std::move(fn));
  return [callable](const Element& input) -> absl::StatusOr<bool> {
    return CallPython<bool>(*callable, "filter", [&] {
      py::object keep = callable->fn()(ElementToPython(input));
      // NumPy bools and 0-d arrays have truth values too.
      const int truth = PyObject_IsTrue(keep.ptr());
      if (truth < 0) throw py::error_already_set();
      return truth == 1;
    });
  };
}

}  // namespace sluice::python
