// The _sluice extension module, which the `sluice` package wraps.
#include <pybind11/pybind11.h>

#include "python/src/bindings.h"
#include "python/src/status.h"

PYBIND11_MODULE(_sluice, module) {
  module.doc() = "Sluice's C++ SDK for Python; import the `sluice` package instead.";
  sluice::python::RegisterErrors(module);
  sluice::python::BindDataset(module);
  sluice::python::BindDistribute(module);
}
