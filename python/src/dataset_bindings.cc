// sluice.Dataset and its iterator: the public C++ Dataset with the YAML
// ops' snake_case names and arguments.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "python/src/bindings.h"
#include "python/src/callables.h"
#include "python/src/client_functions.h"
#include "python/src/read_ahead.h"
#include "python/src/status.h"
#include "python/src/values.h"
#include "sluice/dataset.h"
#include "sluice/iterator.h"
#include "sluice/metrics.h"

namespace sluice::python {
namespace py = pybind11;
namespace {

void RequireCallable(py::handle fn, const char* op, const py::kwargs& args) {
  if (!PyCallable_Check(fn.ptr())) {
    ThrowStatus(absl::InvalidArgumentError(
        absl::StrCat(op, " takes a registered function's name or a Python callable, not ",
                     std::string(py::str(py::type::of(fn).attr("__name__"))))));
  }
  if (!args.empty()) {
    ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
        op, ": keyword arguments (", std::string(py::str(py::list(args.attr("keys")()))),
        ") go to registered functions; bind a callable's own arguments with functools.partial or a lambda")));
  }
}

template <typename Enum>
Enum ParseName(const std::string& field, const std::string& name,
               const std::vector<std::pair<std::string, Enum>>& choices) {
  std::string valid;
  for (const auto& [choice, value] : choices) {
    if (choice == name) return value;
    absl::StrAppend(&valid, valid.empty() ? "" : ", ", choice);
  }
  ThrowStatus(absl::InvalidArgumentError(absl::StrCat(field, " '", name, "' is not one of: ", valid)));
}

// distribute(cross_trainer_cache=...): a dict {"trainer_id": ..., "max_bytes":
// ...} (as in YAML), or an object with those attributes.
ServiceOptions::CrossTrainerCache CrossTrainerCacheFrom(const py::object& value) {
  ServiceOptions::CrossTrainerCache cache;
  if (py::isinstance<py::dict>(value)) {
    for (const auto& [key, item] : value.cast<py::dict>()) {
      const std::string name = py::str(key);
      if (name == "trainer_id") {
        cache.trainer_id = py::str(item);
      } else if (name == "max_bytes") {
        cache.max_bytes = item.cast<int64_t>();
      } else {
        throw py::value_error("cross_trainer_cache: unknown key '" + name +
                              "' (valid: trainer_id, max_bytes)");
      }
    }
    return cache;
  }
  if (!py::hasattr(value, "trainer_id") || !py::hasattr(value, "max_bytes")) {
    throw py::type_error(
        "cross_trainer_cache must be a dict {'trainer_id': ..., 'max_bytes': ...} or have "
        "trainer_id and max_bytes attributes");
  }
  cache.trainer_id = py::str(value.attr("trainer_id"));
  cache.max_bytes = value.attr("max_bytes").cast<int64_t>();
  return cache;
}

ServiceOptions ServiceOptionsFrom(const std::string& processing_mode, const std::string& service,
                                  std::optional<std::string> job_name, std::optional<int64_t> num_consumers,
                                  std::optional<int64_t> consumer_index,
                                  std::optional<std::string> compression, bool exactly_once,
                                  std::optional<std::string> sharding_policy,
                                  int64_t max_outstanding_requests, int64_t timeout_ms, bool allow_partial,
                                  int64_t connections_per_worker, const std::string& transport,
                                  bool deterministic, const py::object& cross_trainer_cache) {
  ServiceOptions options;
  options.service = service;
  options.processing_mode =
      ParseName<ProcessingMode>("processing_mode", processing_mode,
                                {{"parallel_epochs", ProcessingMode::kParallelEpochs},
                                 {"distributed_epoch", ProcessingMode::kDistributedEpoch}});
  options.job_name = job_name.value_or("");
  if (num_consumers.has_value() != consumer_index.has_value()) {
    ThrowStatus(
        absl::InvalidArgumentError("num_consumers and consumer_index go together: set both or neither"));
  }
  options.num_consumers = num_consumers.value_or(0);
  options.consumer_index = consumer_index.value_or(0);
  if (compression.has_value()) {
    options.compression =
        ParseName<ServiceOptions::Compression>("compression", *compression,
                                               {{"none", ServiceOptions::Compression::kNone},
                                                {"snappy", ServiceOptions::Compression::kSnappy},
                                                {"zstd", ServiceOptions::Compression::kZstd}});
  }
  options.exactly_once = exactly_once;
  options.deterministic = deterministic;
  if (sharding_policy.has_value()) {
    options.sharding_policy = ParseName<ShardingPolicy>("sharding_policy", *sharding_policy,
                                                        {{"OFF", ShardingPolicy::kOff},
                                                         {"DYNAMIC", ShardingPolicy::kDynamic},
                                                         {"FILE", ShardingPolicy::kFile},
                                                         {"DATA", ShardingPolicy::kData},
                                                         {"FILE_OR_DATA", ShardingPolicy::kFileOrData},
                                                         {"HINT", ShardingPolicy::kHint}});
  }
  options.max_outstanding_requests = max_outstanding_requests;
  options.timeout_ms = timeout_ms;
  options.allow_partial = allow_partial;
  options.connections_per_worker = connections_per_worker;
  options.transport = transport;
  if (!cross_trainer_cache.is_none())
    options.cross_trainer_cache = CrossTrainerCacheFrom(cross_trainer_cache);
  return options;
}

// Python's iterator over a Dataset: the C++ iterator, read a few
// elements ahead on a thread of its own so that Ctrl-C interrupts a
// blocking read (read_ahead.h).
class PyIterator {
 public:
  explicit PyIterator(absl::StatusOr<Iterator> iterator)
      : iterator_(std::make_shared<Iterator>(ValueOrThrow(std::move(iterator)))),
        reader_(std::make_unique<ReadAhead<Element>>(
            [iterator = iterator_] { return iterator->GetNextAsOptional(); }, kReadAheadElements,
            /*stop_after_error=*/true, ElementBytes, kReadAheadBytes)) {}

  // Iterator::Save as of the last element Python took: those read ahead
  // go in front, for a restore to give first.
  py::bytes Save() {
    absl::StatusOr<std::string> state = reader_->WhilePaused<absl::StatusOr<std::string>>(
        [this](const std::deque<absl::StatusOr<std::optional<Element>>>& ahead) {
          std::vector<Element> elements;
          for (const absl::StatusOr<std::optional<Element>>& value : ahead) {
            if (value.ok() && value->has_value()) elements.push_back(**value);
          }
          return iterator_->Save(elements);
        });
    return py::bytes(ValueOrThrow(std::move(state)));
  }

  py::object Next() {
    absl::StatusOr<std::optional<Element>> next = TimedNext();
    if (!next.ok()) ThrowStatus(next.status());
    if (!next->has_value()) throw py::stop_iteration();
    return ElementToPython(**next);
  }

  // None at the end of the input.
  py::object NextAsOptional() {
    absl::StatusOr<std::optional<Element>> next = TimedNext();
    if (!next.ok()) ThrowStatus(next.status());
    if (!next->has_value()) return py::none();
    return ElementToPython(**next);
  }

 private:
  // Enough that the reading thread is woken once per 16 small elements;
  // few enough that a dropped iterator leaves little read and unused.
  static constexpr size_t kReadAheadElements = 32;
  static constexpr size_t kReadAheadBytes = size_t{8} << 20;

  // The Python thread is the trainer's: its wait, not the reading
  // thread's, is what autoscaling needs (sluice/metrics.h).
  absl::StatusOr<std::optional<Element>> TimedNext() {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::optional<Element>> next = reader_->Next();
    NoteTrainerWait(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return next;
  }

  static size_t ElementBytes(const Element& element) {
    size_t bytes = 0;
    for (const Tensor& tensor : element.components) {
      // Strings count their pointers' worth; what matters is big arrays.
      bytes += static_cast<size_t>(tensor.num_elements()) *
               (tensor.dtype() == DType::kString ? sizeof(std::string) : DTypeSize(tensor.dtype()));
    }
    return bytes;
  }
  // Shared with the reading thread, which calls it between pauses.
  std::shared_ptr<Iterator> iterator_;
  std::unique_ptr<ReadAhead<Element>> reader_;
};

py::list SpecToPython(const ElementSpec& spec) {
  py::list components;
  for (size_t i = 0; i < spec.components.size(); ++i) {
    const TensorSpec& component = spec.components[i];
    py::object shape = py::none();
    if (!component.shape.unknown_rank) {
      py::list dims;
      for (int64_t d : component.shape.dims)
        dims.append(d == kUnknownDim ? py::object(py::none()) : py::int_(d));
      shape = py::tuple(dims);
    }
    py::object name = spec.names.empty() ? py::object(py::none()) : py::str(spec.names[i]);
    components.append(py::make_tuple(name, shape, NumpyDTypeName(component.dtype)));
  }
  return components;
}

}  // namespace

void BindDataset(py::module_& module) {
  py::class_<PyIterator>(module, "Iterator",
                         "Reads a Dataset's elements; `next()` raises StopIteration at the end.")
      .def("__iter__", [](PyIterator& self) -> PyIterator& { return self; })
      .def("__next__", &PyIterator::Next)
      .def("get_next", &PyIterator::Next, "The next element; StopIteration at the end of the input.")
      .def("get_next_as_optional", &PyIterator::NextAsOptional,
           "The next element, or None at the end of the input.")
      .def("save", &PyIterator::Save,
           "Where the iterator stands, as bytes: Dataset.iterator(restore_from=...) goes on from the next "
           "element. A read from the service saves in distributed_epoch with exactly_once.");

  py::class_<Dataset> dataset(
      module, "Dataset",
      "A pipeline definition: each method returns a new Dataset. Iterating runs it (a pipeline "
      "that reads from the service starts a new iteration of its job).");
  BindSequenceOps(dataset);
  dataset
      .def_static(
          "range", [](int64_t stop) { return Dataset::Range(stop); }, py::arg("stop"))
      .def_static(
          "range",
          [](int64_t start, int64_t stop, int64_t step) { return Dataset::Range(start, stop, step); },
          py::arg("start"), py::arg("stop"), py::arg("step") = 1, "range(stop) or range(start, stop, step=1)")
      .def_static(
          "from_tensors",
          [](py::handle structure) {
            Components c = ComponentsFromPython(structure);
            return Dataset::FromTensors(std::move(c.tensors), std::move(c.names));
          },
          py::arg("structure"), "One element: an array, a tuple of arrays, or a dict of them.")
      .def_static(
          "from_tensor_slices",
          [](py::handle structure) {
            Components c = ComponentsFromPython(structure);
            return Dataset::FromTensorSlices(std::move(c.tensors), std::move(c.names));
          },
          py::arg("structure"), "One element per row of the arrays (a dict gives named elements).")
      .def_static(
          "from_yaml", [](const std::string& path) { return ValueOrThrow(Dataset::FromYamlFile(path)); },
          py::arg("path"), "A YAML pipeline file; errors name its file and line.")
      .def_static(
          "list_files",
          [](std::vector<std::string> patterns, bool shuffle, std::optional<int64_t> seed) {
            return Dataset::ListFiles(std::move(patterns), shuffle, seed);
          },
          py::arg("patterns"), py::arg("shuffle") = true, py::arg("seed") = py::none(),
          "The file names that match the glob patterns, one string element each (shuffled unless "
          "shuffle=False; seed fixes the order).")
      .def_static(
          "image_folder",
          [](std::string root, std::vector<std::string> extensions, bool shuffle,
             std::optional<int64_t> seed) {
            return Dataset::ImageFolder(std::move(root), std::move(extensions), shuffle, seed);
          },
          py::arg("root"), py::arg("extensions") = std::vector<std::string>{}, py::arg("shuffle") = false,
          py::arg("seed") = py::none(),
          "torchvision's ImageFolder layout, root/CLASS/FILE: one {image: bytes, label: int64, path: bytes} "
          "element per file, labels numbering the class folders in sorted order (extensions default to jpg, "
          "jpeg, png).")
      .def_static(
          "webdataset",
          [](std::vector<std::string> files, std::vector<std::string> keys) {
            return Dataset::WebDataset(std::move(files), std::move(keys));
          },
          py::arg("files"), py::arg("keys") = std::vector<std::string>{},
          "POSIX tar shards in the WebDataset convention: one {__key__, EXT: bytes, ...} element per sample "
          "(keys: the extensions to keep; default those of the first sample). Each shard is a split.")
      .def_static(
          "text_line",
          [](std::vector<std::string> files, std::string compression_type) {
            return Dataset::TextLine(std::move(files), std::move(compression_type));
          },
          py::arg("files"), py::arg("compression_type") = "",
          "The lines of text files, one bytes element each; compression_type '' , 'GZIP' or 'ZLIB'.")
      .def_static(
          "json_lines",
          [](std::vector<std::string> files, const py::object& fields, std::string compression_type) {
            // A dict {name: type} declares each field's type, in its order;
            // a list of names reads them all as bytes.
            std::vector<std::string> names;
            std::vector<std::string> types;
            if (py::isinstance<py::dict>(fields)) {
              for (const auto& [name, type] : fields.cast<py::dict>()) {
                names.push_back(py::cast<std::string>(name));
                types.push_back(py::cast<std::string>(type));
              }
            } else {
              names = fields.cast<std::vector<std::string>>();
            }
            return Dataset::JsonLines(std::move(files), std::move(names), std::move(compression_type),
                                      std::move(types));
          },
          py::arg("files"), py::arg("fields"), py::arg("compression_type") = "",
          "JSON-lines files: one element per line, one component per field, named after it. `fields` is a "
          "list "
          "of names (each a bytes scalar: a JSON string as its text, any other value as its JSON) or a dict "
          "{name: type} with types string, bool, int32, int64, float32, float64, or a numeric type with [] "
          "for "
          "an array of numbers. A value of the wrong type is InvalidArgument naming the file, line and "
          "field. "
          "A malformed line is DataLoss naming the file "
          "and "
          "line. Each file is a split.")
      .def_static(
          "tfrecord",
          [](std::vector<std::string> files, std::string compression_type) {
            return Dataset::TFRecord(std::move(files), std::move(compression_type));
          },
          py::arg("files"), py::arg("compression_type") = "",
          "The records of TFRecord files, one bytes element each; compression_type '', 'GZIP' or 'ZLIB'.")
      .def_static(
          "zip", [](const std::vector<Dataset>& datasets) { return Dataset::Zip(datasets); },
          py::arg("datasets"), "Elements made of one element of each dataset, until the shortest ends.")
      .def_static(
          "sample_from_datasets",
          [](const std::vector<Dataset>& datasets, std::optional<std::vector<double>> weights,
             std::optional<int64_t> seed, bool stop_on_empty_dataset,
             std::optional<std::string> weights_file) {
            if (weights_file.has_value()) {
              if (weights.has_value()) {
                ThrowStatus(absl::InvalidArgumentError(
                    "sample_from_datasets: give weights or weights_file, not both"));
              }
              return Dataset::SampleFromDatasetsWithWeightsFile(datasets, *weights_file, seed,
                                                                stop_on_empty_dataset);
            }
            return Dataset::SampleFromDatasets(datasets, weights.value_or(std::vector<double>{}), seed,
                                               stop_on_empty_dataset);
          },
          py::arg("datasets"), py::arg("weights") = py::none(), py::arg("seed") = py::none(),
          py::arg("stop_on_empty_dataset") = false, py::arg("weights_file") = py::none(),
          "Each element from one of datasets, picked at random with weights (normalised; None: equal). When "
          "one ends, the result ends if stop_on_empty_dataset, else the others go on with their weights "
          "renormalised. seed fixes the draws. weights_file (instead of weights): a file of the weights, "
          "read "
          "when an iterator starts and again at each restore, so that a restored run goes on with the "
          "file's weights of then.")
      .def_static(
          "choose_from_datasets",
          [](const std::vector<Dataset>& datasets, const Dataset& choice_pipeline,
             bool stop_on_empty_dataset) {
            return Dataset::ChooseFromDatasets(datasets, choice_pipeline, stop_on_empty_dataset);
          },
          py::arg("datasets"), py::arg("choice_pipeline"), py::arg("stop_on_empty_dataset") = true,
          "The next element of datasets[i] for each int64 scalar i of choice_pipeline; an index out of range "
          "raises. Choosing a dataset that ended ends the result if stop_on_empty_dataset, else is skipped.")
      .def_static(
          "deserialize",
          [](const py::bytes& bytes) { return ValueOrThrow(Dataset::Deserialize(std::string(bytes))); },
          py::arg("data"), "A dataset from the bytes of Dataset.serialize().")
      .def(
          "map",
          [](const Dataset& self, py::handle fn, int64_t num_parallel_calls, bool deterministic,
             const py::kwargs& args) {
            const MapOptions options{num_parallel_calls, deterministic};
            if (py::isinstance<py::str>(fn))
              return self.Map(fn.cast<std::string>(), ArgsFromKwargs(args), options);
            // A callable's only keyword: what it returns (output_spec).
            std::optional<ElementSpec> output_spec;
            py::kwargs rest;
            for (auto [key, value] : args) {
              if (py::str(key).cast<std::string>() == "output_spec") {
                py::kwargs declared;
                declared[key] = value;
                output_spec = ValueOrThrow(ParseOutputSpec(ArgsFromKwargs(declared).at("output_spec")));
              } else {
                rest[key] = value;
              }
            }
            RequireCallable(fn, "map", rest);
            const auto callable = py::reinterpret_borrow<py::function>(fn);
            Dataset made = self.MapLocal(MapFunctionFromPython(callable), output_spec, options);
            RememberCallable(made, callable);
            return made;
          },
          py::arg("fn"), py::kw_only(), py::arg("num_parallel_calls") = 0, py::arg("deterministic") = true,
          "map(fn, *, num_parallel_calls=0, deterministic=True, **args)\n\n"
          "fn is a registered element function's name (`sluice functions` lists them), with its arguments as "
          "keywords, or a Python callable that takes an element and returns the new one (arrays, scalars, a "
          "tuple or a dict). output_spec=... declares what a py: function or a callable returns, so that the "
          "steps after it find its components: {\"image\": \"float32[?,?,3]\", \"label\": \"int64\"}, a list "
          "of types, or one type. A callable runs in this process: in a local pipeline or after "
          "`distribute`; "
          "num_parallel_calls > 1 runs it on that many threads, each taking the GIL per call. "
          "num_parallel_calls=-1: one per core.")
      .def(
          "filter",
          [](const Dataset& self, py::handle fn, const py::kwargs& args) {
            if (py::isinstance<py::str>(fn)) return self.Filter(fn.cast<std::string>(), ArgsFromKwargs(args));
            RequireCallable(fn, "filter", args);
            const auto callable = py::reinterpret_borrow<py::function>(fn);
            Dataset made = self.FilterLocal(PredicateFromPython(callable));
            RememberCallable(made, callable);
            return made;
          },
          py::arg("fn"),
          "filter(fn, **args)\n\nKeeps the elements for which fn is true: a registered predicate's name "
          "with its arguments as keywords, or a Python callable (see map).")
      .def(
          "batch",
          [](const Dataset& self, int64_t batch_size, bool drop_remainder, int64_t num_parallel_calls,
             bool deterministic) {
            return self.Batch(batch_size, {drop_remainder, num_parallel_calls, deterministic});
          },
          py::arg("batch_size"), py::arg("drop_remainder") = false, py::arg("num_parallel_calls") = 0,
          py::arg("deterministic") = true,
          "Stacks batch_size consecutive elements along a new first dimension; a last smaller batch is "
          "kept unless drop_remainder=True. num_parallel_calls > 1 stacks batches on that many threads.")
      .def("unbatch", &Dataset::Unbatch, "Splits each element along its first dimension into rows.")
      .def("rebatch", &Dataset::Rebatch, py::arg("batch_size"), py::arg("drop_remainder") = false,
           "Regroups batched elements into batches of batch_size rows.")
      .def("shuffle", &Dataset::Shuffle, py::arg("buffer_size"), py::arg("seed") = py::none(),
           py::arg("reshuffle_each_iteration") = true,
           "Shuffles through a buffer of buffer_size elements; seed fixes the order.")
      .def("repeat", &Dataset::Repeat, py::arg("count") = -1, "Repeats the input count times (-1: forever).")
      .def("take", &Dataset::Take, py::arg("count"), "The first count elements.")
      .def("skip", &Dataset::Skip, py::arg("count"), "All but the first count elements.")
      .def("shard", &Dataset::Shard, py::arg("num_shards"), py::arg("index"),
           "Every num_shards-th element, starting at index.")
      .def("enumerate", &Dataset::Enumerate, py::arg("start") = 0,
           "Pairs each element with its index: (index, element).")
      .def("interleave", &Dataset::Interleave, py::arg("pipeline"), py::arg("cycle_length") = 4,
           py::arg("block_length") = 1, py::arg("num_parallel_calls") = 0,
           "Maps each element to the sub-pipeline (its file source without files reads the element's file "
           "names) and takes block_length elements from each of cycle_length open sub-pipelines in turn, in "
           "tf.data's order; num_parallel_calls > 1 (or -1) reads them on threads of their own, same order.")
      .def("flat_map", &Dataset::FlatMap, py::arg("pipeline"),
           "Each element's sub-pipeline (its file source without files reads the element's file names), "
           "read to its end before the next element's: interleave with cycle_length 1.")
      .def("concatenate", &Dataset::Concatenate, py::arg("pipeline"),
           "This dataset's elements, then pipeline's; their element specs must be compatible.")
      .def("unique", &Dataset::Unique,
           "Drops the elements seen before (elements of one scalar int32, int64 or string component).")
      .def(
          "scan",
          [](const Dataset& self, const std::string& fn, py::handle initial_state, const py::kwargs& args) {
            return self.Scan(fn, ComponentsFromPython(initial_state).tensors, ArgsFromKwargs(args));
          },
          py::arg("fn"), py::arg("initial_state"),
          "scan(fn, initial_state, **args)\n\nCarries a state through the elements: fn, a registered "
          "function of "
          "(state, element) -> (new state, output) such as 'accumulate', with its arguments as keywords, "
          "starting "
          "from initial_state (an array, or a tuple of them for a state of several components).")
      .def(
          "take_while",
          [](const Dataset& self, const std::string& predicate, const py::kwargs& args) {
            return self.TakeWhile(predicate, ArgsFromKwargs(args));
          },
          py::arg("predicate"),
          "take_while(predicate, **args)\n\nThe elements before the first for which predicate, a registered "
          "function of one bool scalar (with its arguments as keywords), is false.")
      .def(
          "cache", &Dataset::Cache, py::arg("filename") = "", py::arg("max_bytes") = 0,
          "Keeps the first complete pass in memory (filename empty; at most max_bytes, 0: 1 GiB) or in files "
          "at filename, and reads every later pass from there without running the steps before it.")
      .def("prefetch", &Dataset::Prefetch, py::arg("buffer_size") = -1,
           "Makes up to buffer_size elements ahead on a thread of its own (-1: tuned).")
      .def("ignore_errors", &Dataset::IgnoreErrors, py::arg("quiet") = false,
           "Drops the elements whose computation failed (a corrupt image), counting them; unless quiet, the "
           "first error and the count go to stderr.")
      .def("with_plugin", &Dataset::WithPlugin, py::arg("library_path"),
           "Loads element functions from a plugin library (where the pipeline is built).")
      .def(
          "distribute",
          [](const Dataset& self, const std::string& processing_mode, const std::string& service,
             std::optional<std::string> job_name, std::optional<int64_t> num_consumers,
             std::optional<int64_t> consumer_index, std::optional<std::string> compression, bool exactly_once,
             std::optional<std::string> sharding_policy, int64_t max_outstanding_requests, int64_t timeout_ms,
             bool allow_partial, int64_t connections_per_worker, const std::string& transport,
             bool deterministic, const py::object& cross_trainer_cache) {
            // Python callables go to the workers pickled; the service runs
            // them only where its operator allows client functions.
            const Dataset shipped = ShipCallables(self);
            ThrowIfError(shipped.CheckRunsOnService());
            return shipped.ReadFromService(ServiceOptionsFrom(
                processing_mode, service, job_name, num_consumers, consumer_index, compression, exactly_once,
                sharding_policy, max_outstanding_requests, timeout_ms, allow_partial, connections_per_worker,
                transport, deterministic, cross_trainer_cache));
          },
          py::arg("processing_mode"), py::arg("service"), py::arg("job_name") = py::none(),
          py::arg("num_consumers") = py::none(), py::arg("consumer_index") = py::none(),
          py::arg("compression") = py::none(), py::arg("exactly_once") = false,
          py::arg("sharding_policy") = py::none(), py::arg("max_outstanding_requests") = 0,
          py::arg("timeout_ms") = 0, py::arg("allow_partial") = false, py::arg("connections_per_worker") = 0,
          py::arg("transport") = "auto", py::arg("deterministic") = false,
          py::arg("cross_trainer_cache") = py::none(),
          "The steps so far run on the data service at `service` (grpc://HOST:PORT); the steps after, here. "
          "processing_mode is 'parallel_epochs' or 'distributed_epoch'. connections_per_worker: TCP "
          "connections to each worker (1 to 16; 0 means 1), for large elements. transport: 'auto' (shared "
          "memory with a worker on this host, else TCP) or 'tcp'. deterministic (distributed_epoch): "
          "elements in "
          "split order whatever the workers' number or speed; implies exactly_once. cross_trainer_cache "
          "({'trainer_id': ..., 'max_bytes': ...}, with job_name, over an endless dataset): every trainer "
          "reads the whole stream from its own position, and the workers compute each element once.")
      .def("fingerprint", &Dataset::Fingerprint,
           "A hex digest of the definition: equal for equal pipelines, built in YAML or Python.")
      .def("reads_named_job", &Dataset::ReadsNamedJob,
           "True when a distribute step names a job_name, whose consumers share its elements.")
      .def(
          "check_repeatable_order", [](const Dataset& self) { ThrowIfError(self.CheckRepeatableOrder()); },
          "Raises (naming the step) unless the pipeline gives its elements in the same order on every run, "
          "as sharding it by element across processes needs.")
      .def(
          "check_savable", [](const Dataset& self) { ThrowIfError(self.CheckSavable()); },
          "Raises (naming the step and a fix) unless an iterator of this pipeline can be saved and restored "
          "exactly; from the definition alone, before anything is read.")
      .def("reads_from_service", &Dataset::ReadsFromService,
           "True when the pipeline has a distribute step: the steps before it run on the service.")
      .def_property("next_read_repetition", &Dataset::NextReadRepetition, &Dataset::SetNextReadRepetition,
                    "The repetition of its named job that the next iterator reads: each iterator (each "
                    "epoch) takes the next, counted by this dataset, its copies and the datasets made from "
                    "it; pickling carries it.")
      .def("read_as_peer", &Dataset::ReadAsPeer, py::arg("job_name"), py::arg("epoch_key"),
           "The same pipeline read as one of several peers in one trainer (DataLoader workers, DDP "
           "ranks) that split each repetition of one job, epoch_key naming the epoch they read together: "
           "the distribute step gets job_name unless it names one; a repetition these peers read to its "
           "end before this reader joined is empty for it, and one finished under another key is skipped "
           "for the next. Shares this dataset's repetition counter.")
      .def("__reduce__",
           [](const Dataset& self) {
             // Another process (DataLoader workers started with spawn) has
             // none of this process's callables.
             if (absl::Status local = self.CheckRunsOnService(); !local.ok()) {
               ThrowStatus(absl::InvalidArgumentError(
                   "a dataset with a Python callable cannot be pickled: another process has none of this "
                   "process's callables (use registered functions, or fork instead of spawn)"));
             }
             return py::make_tuple(py::module_::import("sluice").attr("_dataset_from_bytes"),
                                   py::make_tuple(py::bytes(self.Serialize()), self.NextReadRepetition()));
           })
      .def(
          "serialize", [](const Dataset& self) { return py::bytes(self.Serialize()); },
          "The definition as bytes, for Dataset.deserialize.")
      .def(
          "cardinality",
          [](const Dataset& self) {
            return ValueOrThrow(
                CallInterruptibly<absl::StatusOr<int64_t>>([self] { return self.Cardinality(); }));
          },
          "The number of elements, or sluice.INFINITE or sluice.UNKNOWN.")
      .def("_element_spec",
           [](const Dataset& self) {
             return SpecToPython(ValueOrThrow(
                 CallInterruptibly<absl::StatusOr<ElementSpec>>([self] { return self.Spec(); })));
           })
      .def("__iter__",
           [](const Dataset& self) {
             return PyIterator(
                 CallInterruptibly<absl::StatusOr<Iterator>>([self] { return self.MakeIterator(); }));
           })
      .def(
          "iterator",
          [](const Dataset& self, std::optional<py::bytes> restore_from, int64_t consumer_index,
             int64_t num_consumers) {
            if (!restore_from.has_value()) {
              return PyIterator(
                  CallInterruptibly<absl::StatusOr<Iterator>>([self] { return self.MakeIterator(); }));
            }
            std::string state = *restore_from;
            const RestoreOptions options{.consumer_index = consumer_index, .num_consumers = num_consumers};
            return PyIterator(CallInterruptibly<absl::StatusOr<Iterator>>(
                [self, state, options] { return self.MakeIterator(state, options); }));
          },
          py::arg("restore_from") = py::none(), py::arg("consumer_index") = 0, py::arg("num_consumers") = 1,
          "A new iterator, or one that goes on from Iterator.save() bytes (or a job checkpoint from "
          "sluice.merge_saved_states, as consumer_index of num_consumers).");
  module.def(
      "merge_saved_states",
      [](const std::vector<py::bytes>& states) {
        std::vector<std::string> bytes(states.begin(), states.end());
        return py::bytes(ValueOrThrow(MergeSavedStates(bytes)));
      },
      py::arg("states"),
      "Merges the Iterator.save() bytes of a shared job's consumers, saved at one step, into one job "
      "checkpoint that Dataset.iterator(restore_from=..., consumer_index=i, num_consumers=m) resumes.");
  module.attr("INFINITE") = kInfiniteCardinality;
  module.attr("UNKNOWN") = kUnknownCardinality;
}

}  // namespace sluice::python
