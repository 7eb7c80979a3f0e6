// The _sluice extension module, which the `sluice` package wraps.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "python/src/bindings.h"
#include "python/src/status.h"
#include "sluice/metrics.h"

PYBIND11_MODULE(_sluice, module) {
  module.doc() = "Sluice's C++ SDK for Python; import the `sluice` package instead.";
  // NumPy, and pybind11's table of its C API, are set up here, while the
  // import holds the GIL: done lazily by the first element converted, a
  // reading thread holding the GIL would wait on the import lock of
  // another thread's `import numpy`, which waits for the GIL (issue 32).
  pybind11::module_::import("numpy");
  (void)pybind11::dtype::of<float>();
  sluice::python::RegisterErrors(module);
  sluice::python::BindDataset(module);
  sluice::python::BindDistribute(module);
  module.def("metrics", &sluice::MetricsText,
             "This process's metrics in Prometheus text format: the client's wait time and bytes received, "
             "and the process's CPU and memory.");
  // sluice.torch's counters of what even_batches did (sluice.metrics()).
  const auto bind_batch_counter = [&module](const char* function, const char* metric, const char* help) {
    module.def(
        function,
        [metric, help](int64_t batches) {
          sluice::IncrementCounter(metric, help, static_cast<double>(batches));
        },
        pybind11::arg("batches"), help);
  };
  bind_batch_counter("_count_dropped_batches", "sluice_torch_dropped_batches_total",
                     "Batches sluice.torch.IterableDataset(even_batches='drop') dropped at an epoch's end so "
                     "that DDP ranks take equal steps");
  bind_batch_counter("_count_repeated_batches", "sluice_torch_repeated_batches_total",
                     "Batches sluice.torch.IterableDataset(even_batches='pad') repeated at an epoch's end so "
                     "that DDP ranks take equal steps, every element read at least once");
}
