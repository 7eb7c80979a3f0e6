// The parts of the _sluice extension module, each adding its names.
#ifndef SLUICE_PYTHON_SRC_BINDINGS_H_
#define SLUICE_PYTHON_SRC_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace sluice::python {

void BindDataset(pybind11::module_& module);
void BindDistribute(pybind11::module_& module);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_BINDINGS_H_
