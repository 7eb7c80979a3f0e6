#include "python/src/values.h"

#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "python/src/status.h"

namespace sluice::python {
namespace py = pybind11;
namespace {

// `name` is the keyword argument that `value` is (part of), for errors.
FunctionArg ArgFromPython(py::handle value, const std::string& name) {
  // NumPy arrays and scalars (mean=np.array([...]), size=np.int64(32)) as
  // the Python lists and numbers they hold.
  if (py::hasattr(py::type::of(value), "__module__") &&
      std::string(py::str(py::type::of(value).attr("__module__"))) == "numpy" &&
      py::hasattr(value, "tolist")) {
    return ArgFromPython(value.attr("tolist")(), name);
  }
  // bool first: Python's bool is an int.
  if (py::isinstance<py::bool_>(value)) return FunctionArg(value.cast<bool>());
  if (py::isinstance<py::int_>(value)) return FunctionArg(value.cast<int64_t>());
  if (py::isinstance<py::float_>(value)) return FunctionArg(value.cast<double>());
  if (py::isinstance<py::str>(value)) return FunctionArg(value.cast<std::string>());
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::vector<FunctionArg> values;
    for (py::handle item : value) values.push_back(ArgFromPython(item, name));
    return FunctionArg(std::move(values));
  }
  if (py::isinstance<py::dict>(value)) {
    std::map<std::string, FunctionArg> entries;
    for (auto [key, item] : py::reinterpret_borrow<py::dict>(value))
      entries.emplace(py::str(key), ArgFromPython(item, name));
    return FunctionArg(std::move(entries));
  }
  ThrowStatus(
      absl::InvalidArgumentError(absl::StrCat("function argument '", name,
                                              "' is a number, bool, str, list or dict (or a NumPy array or "
                                              "scalar), not ",
                                              std::string(py::str(py::type::of(value))))));
}

// The NumPy dtype of a numeric dtype, by name: the buffer-protocol
// formats would give np.longlong for int64, a type apart from np.int64.
// bfloat16 has none.
std::optional<py::dtype> NumpyDType(DType dtype) {
  if (dtype == DType::kString || dtype == DType::kBFloat16 || dtype == DType::kInvalid) return std::nullopt;
  // Made once per dtype: parsing the name costs more than the rest of
  // turning a small tensor into an array. Held for the process's life.
  static PyObject* made[static_cast<int>(DType::kString) + 1] = {};
  PyObject*& cached = made[static_cast<int>(dtype)];
  if (cached == nullptr) cached = py::dtype::from_args(py::str(DTypeName(dtype))).release().ptr();
  return py::reinterpret_borrow<py::dtype>(cached);
}

py::object StringsToPython(const Tensor& tensor) {
  const std::string* values = tensor.data<std::string>();
  if (tensor.rank() == 0) return py::bytes(values[0]);
  py::array out(py::dtype("O"), tensor.shape());
  auto** objects = static_cast<PyObject**>(out.mutable_data());
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    objects[i] = py::bytes(values[i]).release().ptr();
  }
  return out;
}

DType DTypeOfArray(const py::array& array) {
  const py::dtype dtype = array.dtype();
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  if (kind == 'b') return DType::kBool;
  if (kind == 'i')
    return size == 1 ? DType::kInt8 : size == 2 ? DType::kInt16 : size == 4 ? DType::kInt32 : DType::kInt64;
  if (kind == 'u') {
    return size == 1   ? DType::kUInt8
           : size == 2 ? DType::kUInt16
           : size == 4 ? DType::kUInt32
                       : DType::kUInt64;
  }
  if (kind == 'f' && size == 2) return DType::kFloat16;
  if (kind == 'f' && size == 4) return DType::kFloat32;
  if (kind == 'f' && size == 8) return DType::kFloat64;
  if (kind == 'S' || kind == 'U' || kind == 'O') return DType::kString;
  return DType::kInvalid;
}

Tensor StringsFromArray(const py::array& array) {
  Shape shape(array.shape(), array.shape() + array.ndim());
  Tensor tensor(DType::kString, shape);
  std::string* out = tensor.mutable_data<std::string>();
  py::object flat = array.attr("ravel")();
  int64_t i = 0;
  for (py::handle item : flat) {
    if (py::isinstance<py::bytes>(item)) {
      out[i++] = item.cast<std::string>();
    } else if (py::isinstance<py::str>(item)) {
      out[i++] = py::str(item).cast<std::string>();  // UTF-8
    } else {
      ThrowStatus(absl::InvalidArgumentError(absl::StrCat("a string tensor holds bytes or str, not ",
                                                          std::string(py::str(py::type::of(item))))));
    }
  }
  return tensor;
}

}  // namespace

std::string NumpyDTypeName(DType dtype) {
  if (dtype == DType::kString) return "bytes";
  return DTypeName(dtype);
}

py::object TensorToPython(const Tensor& tensor) { return TensorToPython(tensor, nullptr); }

py::object TensorToPython(const Tensor& tensor, std::shared_ptr<const void> keep_alive) {
  if (tensor.dtype() == DType::kString) return StringsToPython(tensor);
  const std::optional<py::dtype> dtype = NumpyDType(tensor.dtype());
  if (!dtype.has_value()) {
    ThrowStatus(absl::UnimplementedError(absl::StrCat(
        "a ", DTypeName(tensor.dtype()), " tensor has no NumPy dtype; cast it in the pipeline first")));
  }
  // The capsule owns a copy of the tensor, which shares (and so keeps
  // alive) its buffer for as long as the array lives.
  struct Owner {
    Tensor tensor;
    std::shared_ptr<const void> keep_alive;
  };
  py::capsule owner(new Owner{tensor, std::move(keep_alive)},
                    [](void* held) { delete static_cast<Owner*>(held); });
  py::array array(*dtype, tensor.shape(), tensor.raw_data(), owner);
  if (tensor.rank() == 0) return array[py::tuple()];  // a NumPy scalar
  return array;
}

py::object ElementToPython(const Element& element) {
  if (element.named()) {
    py::dict out;
    for (size_t i = 0; i < element.size(); ++i)
      out[py::str((*element.names)[i])] = TensorToPython(element.components[i]);
    return out;
  }
  if (element.size() == 1) return TensorToPython(element.components[0]);
  py::tuple out(element.size());
  for (size_t i = 0; i < element.size(); ++i) out[i] = TensorToPython(element.components[i]);
  return out;
}

namespace {

// What a nested Python list holds, found before NumPy sees it: NumPy turns
// [1, "a"] into strings without a word, and a ragged list into its bare
// "inhomogeneous shape" error.
struct ListShape {
  std::vector<int64_t> lengths;  // of the lists at each depth
  size_t leaf_depth = SIZE_MAX;  // where the scalars are
  std::string kind;              // "number" or "string" of the first scalar
  std::string first;             // that scalar's item and type, for messages
};

std::string ItemName(const std::vector<size_t>& path) {
  std::string name = "item ";
  for (size_t i : path) absl::StrAppend(&name, "[", i, "]");
  return path.empty() ? "the value" : name;
}

void WalkList(py::handle value, std::vector<size_t>& path, ListShape& shape) {
  const size_t depth = path.size();
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    const auto length = static_cast<int64_t>(py::len(value));
    if (shape.leaf_depth <= depth || (depth < shape.lengths.size() && shape.lengths[depth] != length)) {
      const std::string other =
          shape.leaf_depth <= depth ? "a scalar" : absl::StrCat(shape.lengths[depth], " items");
      ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
          "a ragged list: ", ItemName(path), " has ", length, " items where another at its depth has ", other,
          "; a component is a rectangular array (pad the rows to one length, or make one element of each)")));
    }
    if (depth == shape.lengths.size()) shape.lengths.push_back(length);
    path.push_back(0);
    for (py::handle item : value) {
      WalkList(item, path, shape);
      ++path.back();
    }
    path.pop_back();
    return;
  }
  if (depth < shape.lengths.size() || (shape.leaf_depth != SIZE_MAX && shape.leaf_depth != depth)) {
    ThrowStatus(absl::InvalidArgumentError(
        absl::StrCat("a ragged list: ", ItemName(path),
                     " is a scalar where another at its depth is a list; a component is a "
                     "rectangular array (pad the rows to one length, or make one element of each)")));
  }
  shape.leaf_depth = depth;
  const bool text = py::isinstance<py::str>(value) || py::isinstance<py::bytes>(value);
  const std::string kind = text ? "string" : "number";
  const std::string described =
      absl::StrCat(ItemName(path), " is ", std::string(py::str(py::type::of(value).attr("__name__"))));
  if (shape.kind.empty()) {
    shape.kind = kind;
    shape.first = described;
  } else if (shape.kind != kind) {
    ThrowStatus(absl::InvalidArgumentError(absl::StrCat("a list that mixes numbers and strings (",
                                                        shape.first, ", ", described,
                                                        "): a component holds one dtype; make its items "
                                                        "all numbers or all strings")));
  }
}

}  // namespace

Tensor TensorFromPython(py::handle value) {
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::vector<size_t> path;
    ListShape shape;
    WalkList(value, path, shape);
  }
  py::array array = py::module_::import("numpy").attr("asarray")(value);
  const DType dtype = DTypeOfArray(array);
  if (dtype == DType::kInvalid) {
    ThrowStatus(
        absl::InvalidArgumentError(absl::StrCat("NumPy dtype ", std::string(py::str(array.dtype())),
                                                " has no Sluice dtype (bool, ints, floats, strings)")));
  }
  if (dtype == DType::kString) return StringsFromArray(array);
  py::array contiguous = py::array::ensure(array, py::array::c_style);
  Shape shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
  Tensor tensor = Tensor::Uninitialized(dtype, shape);
  if (tensor.num_elements() > 0) std::memcpy(tensor.mutable_raw_data(), contiguous.data(), tensor.ByteSize());
  return tensor;
}

Components ComponentsFromPython(py::handle structure) {
  Components out;
  if (py::isinstance<py::dict>(structure)) {
    for (auto [key, value] : py::reinterpret_borrow<py::dict>(structure)) {
      out.names.push_back(py::str(key));
      out.tensors.push_back(TensorFromPython(value));
    }
  } else if (py::isinstance<py::tuple>(structure)) {
    for (py::handle value : py::reinterpret_borrow<py::tuple>(structure))
      out.tensors.push_back(TensorFromPython(value));
  } else {
    out.tensors.push_back(TensorFromPython(structure));
  }
  return out;
}

FunctionArgMap ArgsFromKwargs(const py::kwargs& kwargs) {
  FunctionArgMap args;
  for (auto [key, value] : kwargs) {
    const std::string name = py::str(key);
    args.emplace(name, ArgFromPython(value, name));
  }
  return args;
}

}  // namespace sluice::python
