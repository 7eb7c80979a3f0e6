// sluice.Dataset's ops that group, pad or pack sequences of elements:
// window, group_by_window, bucket_by_sequence_length, padded_batch,
// tokenize and pack_sequences, with the YAML ops' names and arguments.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "python/src/bindings.h"
#include "python/src/values.h"
#include "sluice/dataset.h"

namespace sluice::python {
namespace py = pybind11;
namespace {

std::vector<Tensor> PaddingValues(const std::optional<py::list>& padding_values) {
  std::vector<Tensor> values;
  if (padding_values.has_value()) {
    for (py::handle value : *padding_values) values.push_back(TensorFromPython(value));
  }
  return values;
}

}  // namespace

void BindSequenceOps(py::class_<Dataset>& dataset) {
  dataset
      .def(
          "window", &Dataset::Window, py::arg("size"), py::arg("shift") = 0, py::arg("stride") = 1,
          py::arg("drop_remainder") = false,
          "Windows of size elements starting every shift (0: size), taking every stride-th: each window one "
          "element, its components stacked, which flat_map(Dataset.from_tensor_slices(())) reads row by row.")
      .def(
          "padded_batch",
          [](const Dataset& self, int64_t batch_size,
             std::optional<std::vector<std::vector<int64_t>>> padded_shapes,
             std::optional<py::list> padding_values, bool drop_remainder) {
            return self.PaddedBatch(batch_size, padded_shapes.value_or(std::vector<std::vector<int64_t>>{}),
                                    PaddingValues(padding_values), drop_remainder);
          },
          py::arg("batch_size"), py::arg("padded_shapes") = py::none(),
          py::arg("padding_values") = py::none(), py::arg("drop_remainder") = false,
          "Stacks batch_size elements of different shapes, padding each component to padded_shapes (one list "
          "per "
          "component, -1 for the batch's longest; None pads every dimension that way) with padding_values "
          "(one "
          "scalar per component; None: zeros and empty strings).")
      .def("tokenize", &Dataset::Tokenize, py::arg("model"), py::arg("component") = 0,
           py::arg("add_bos") = false, py::arg("add_eos") = false, py::arg("num_parallel_calls") = 0,
           "Encodes string component `component` with a SentencePiece model (BPE or unigram) into an int32 "
           "vector of token ids, on num_parallel_calls threads as map (the order stays the input's); on a "
           "worker the model file must be under its data_roots.")
      .def("pack_sequences", &Dataset::PackSequences, py::arg("length"), py::arg("method") = "first_fit",
           py::arg("component") = 0, py::arg("padding_value") = 0, py::arg("num_bins") = 0,
           "Packs token vectors into rows of `length`: {tokens, segment_ids, positions}, as T5 and Grain do; "
           "method 'first_fit' or 'best_fit', num_bins rows open at once (0: 8). Longer sequences are cut "
           "into pieces of `length`.")
      .def(
          "group_by_window",
          [](const Dataset& self, const std::string& key_fn, int64_t window_size, const py::kwargs& args) {
            return self.GroupByWindow(key_fn, window_size, ArgsFromKwargs(args));
          },
          py::arg("key_fn"), py::arg("window_size"),
          "group_by_window(key_fn, window_size, **args)\n\nWindows of up to window_size elements with the "
          "same key, the integer scalar that key_fn (a registered function, with its arguments as keywords) "
          "returns; each window is one element, its components stacked, as window's, given when full, and at "
          "the end the groups left in increasing key order.")
      .def(
          "bucket_by_sequence_length",
          [](const Dataset& self, std::vector<int64_t> bucket_boundaries,
             std::vector<int64_t> bucket_batch_sizes, std::optional<std::string> length_fn,
             std::optional<py::dict> length_fn_args, int64_t component,
             std::optional<std::vector<std::vector<int64_t>>> padded_shapes,
             std::optional<py::list> padding_values, bool pad_to_bucket_boundary, bool no_padding,
             bool drop_remainder) {
            BucketOptions options;
            options.length_fn = length_fn.value_or("");
            if (length_fn_args.has_value())
              options.length_fn_args = ArgsFromKwargs(py::kwargs(*length_fn_args));
            options.component = component;
            options.padded_shapes = padded_shapes.value_or(std::vector<std::vector<int64_t>>{});
            options.padding_values = PaddingValues(padding_values);
            options.pad_to_bucket_boundary = pad_to_bucket_boundary;
            options.no_padding = no_padding;
            options.drop_remainder = drop_remainder;
            return self.BucketBySequenceLength(std::move(bucket_boundaries), std::move(bucket_batch_sizes),
                                               options);
          },
          py::arg("bucket_boundaries"), py::arg("bucket_batch_sizes"), py::arg("length_fn") = py::none(),
          py::arg("length_fn_args") = py::none(), py::arg("component") = 0,
          py::arg("padded_shapes") = py::none(), py::arg("padding_values") = py::none(),
          py::arg("pad_to_bucket_boundary") = false, py::arg("no_padding") = false,
          py::arg("drop_remainder") = false,
          "Batches of elements of similar length, as tf.data's: bucket i takes the lengths in "
          "[bucket_boundaries[i-1], bucket_boundaries[i]) and batches bucket_batch_sizes[i] of them, padded "
          "as "
          "padded_batch pads. The length is length_fn's integer scalar (a registered function, its arguments "
          "in length_fn_args) or, without one, the first dimension of component `component`.");
}

}  // namespace sluice::python
