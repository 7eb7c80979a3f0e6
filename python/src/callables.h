// Python callables as the SDK's local map and filter functions, which run
// in this process only (a local pipeline, or the steps after
// `distribute`). Each call takes the GIL; the element goes in as the
// Python value an iterator would yield, and what the callable returns
// comes back as an element the same way from_tensors reads a structure.
#ifndef SLUICE_PYTHON_SRC_CALLABLES_H_
#define SLUICE_PYTHON_SRC_CALLABLES_H_

#include <pybind11/pybind11.h>

#include "sluice/dataset.h"

namespace sluice::python {

LocalMapFunction MapFunctionFromPython(pybind11::function fn);
LocalPredicate PredicateFromPython(pybind11::function fn);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_CALLABLES_H_
