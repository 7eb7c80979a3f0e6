// Sluice values as Python values and back. A numeric tensor becomes a
// NumPy array over the tensor's own buffer (no copy; the array keeps the
// buffer alive), a scalar a NumPy scalar, a string tensor `bytes` (an
// object array of `bytes` when it has more than one). An element of one
// unnamed component is that value, of several a tuple, of named ones a
// dict.
#ifndef SLUICE_PYTHON_SRC_VALUES_H_
#define SLUICE_PYTHON_SRC_VALUES_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "sluice/dataset.h"
#include "sluice/element.h"
#include "sluice/tensor.h"

namespace sluice::python {

pybind11::object TensorToPython(const Tensor& tensor);
// The same, with the array also keeping `keep_alive` (the pooled buffer a
// tensor's memory belongs to).
pybind11::object TensorToPython(const Tensor& tensor, std::shared_ptr<const void> keep_alive);
pybind11::object ElementToPython(const Element& element);
// The NumPy dtype name of a Sluice dtype ("float32", "bytes" for strings).
std::string NumpyDTypeName(DType dtype);

// A copy of `value` (anything numpy.asarray takes; str and bytes become
// string tensors). ValueError for what has no Sluice dtype.
Tensor TensorFromPython(pybind11::handle value);

// The components of a structure: a dict gives named components (in its
// order), a tuple unnamed ones, anything else one component.
struct Components {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;  // empty unless the structure is a dict
};
Components ComponentsFromPython(pybind11::handle structure);

// An element function's keyword arguments (numbers, bools, strings, lists,
// dicts, NumPy arrays and scalars); ValueError naming an argument of
// another type.
FunctionArgMap ArgsFromKwargs(const pybind11::kwargs& kwargs);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_VALUES_H_
