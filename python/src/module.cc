// The _sluice extension module, which the `sluice` package wraps.
#include <pybind11/pybind11.h>

#include "python/src/bindings.h"
#include "python/src/status.h"
#include "service/metrics.h"

PYBIND11_MODULE(_sluice, module) {
  module.doc() = "Sluice's C++ SDK for Python; import the `sluice` package instead.";
  sluice::python::RegisterErrors(module);
  sluice::python::BindDataset(module);
  sluice::python::BindDistribute(module);
  module.def(
      "metrics", [] { return sluice::ProcessMetrics().Render(); },
      "This process's metrics in Prometheus text format: the client's wait time and bytes received, and the "
      "process's CPU and memory.");
}
