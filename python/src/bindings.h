// The parts of the _sluice extension module, each adding its names.
#ifndef SLUICE_PYTHON_SRC_BINDINGS_H_
#define SLUICE_PYTHON_SRC_BINDINGS_H_

#include <pybind11/pybind11.h>

#include "sluice/dataset.h"

namespace sluice::python {

void BindDataset(pybind11::module_& module);
void BindDistribute(pybind11::module_& module);
// The ops that group, pad or pack sequences of elements (window,
// group_by_window, bucket_by_sequence_length, padded_batch, tokenize,
// pack_sequences): sequence_op_bindings.cc.
void BindSequenceOps(pybind11::class_<Dataset>& dataset);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_BINDINGS_H_
