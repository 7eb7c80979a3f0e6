// Python callables in the steps before `distribute`, shipped to the
// workers: each is pickled with cloudpickle into a `py:__client__.call`
// function, which a worker runs in its Python pool only when its operator
// set python.allow_client_functions (and auth): otherwise the service
// refuses the pipeline with InvalidArgument (a ValueError here) naming the
// setting and the operator-module alternative.
#ifndef SLUICE_PYTHON_SRC_CLIENT_FUNCTIONS_H_
#define SLUICE_PYTHON_SRC_CLIENT_FUNCTIONS_H_

#include <pybind11/pybind11.h>

#include "sluice/dataset.h"

namespace sluice::python {

// Notes that the last step of `made` (a MapLocal or FilterLocal) runs `fn`.
void RememberCallable(const Dataset& made, pybind11::function fn);
// `dataset` with every step whose function is a remembered callable made a
// shipped `py:__client__.call`; other steps as they were.
Dataset ShipCallables(const Dataset& dataset);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_CLIENT_FUNCTIONS_H_
