// sluice::Dataset: a fluent builder of pipeline definitions.
//
// Builds the same definition as the equivalent YAML pipeline (same
// defaults, same fingerprint), without running anything:
//
//   sluice::Dataset ds = sluice::Dataset::Range(10).Map("square").Batch(4);
//   absl::StatusOr<std::vector<sluice::Element>> batches = ds.Collect();
//   // [0 1 4 9], [16 25 36 49], [64 81]
//
// Steps before ReadFromService run on the data service's workers; the
// steps after it, in this process:
//
//   sluice::Dataset remote = sluice::Dataset::Range(1000).Map("square")
//       .ReadFromService({.service = "grpc://127.0.0.1:5000",
//                         .processing_mode = sluice::ProcessingMode::kDistributedEpoch})
//       .Batch(32);
//
// Invalid arguments are reported when the pipeline is built (MakeIterator,
// Collect), with the step they belong to. A Dataset is a value: copies
// share their definition, and every method returns a new Dataset.
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_DATASET_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_DATASET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/cardinality.h"
#include "sluice/element.h"
#include "sluice/iterator.h"
#include "sluice/service_options.h"
#include "sluice/tensor.h"

namespace sluice {

namespace internal {
struct DatasetAccess;
struct DatasetDefinition;
struct FunctionArgValue;
}  // namespace internal

// An argument value of an element function: a number, bool, string, or a
// list or map of them.
class FunctionArg {
 public:
  FunctionArg(int value);
  FunctionArg(int64_t value);
  FunctionArg(double value);
  FunctionArg(bool value);
  FunctionArg(const char* value);
  FunctionArg(std::string value);
  FunctionArg(std::vector<FunctionArg> values);
  FunctionArg(std::map<std::string, FunctionArg> entries);

 private:
  friend struct internal::DatasetAccess;
  std::shared_ptr<const internal::FunctionArgValue> value_;
};
using FunctionArgMap = std::map<std::string, FunctionArg>;

// The spec that a function's "output_spec" argument declares: a type
// ("float32[?,?,3]": a dtype, with [d, ...] for a shape, ? for an unknown
// size, [] for a vector, [...] for any rank), a list of types, or a map of
// component names to types. InvalidArgument says what does not parse.
absl::StatusOr<ElementSpec> ParseOutputSpec(const FunctionArg& declared);

struct MapOptions {
  int64_t num_parallel_calls = 0;  // 0 or 1: sequential; -1: one per core
  bool deterministic = true;
};

// Element functions that live in this process: a C++ callable, or a
// Python one through the sluice package. They run only in the steps that
// run here (a local pipeline, or the steps after ReadFromService); a
// pipeline whose steps before ReadFromService use one is refused when it
// is built, since the workers cannot run it.
using LocalMapFunction = std::function<absl::StatusOr<Element>(const Element&)>;
using LocalPredicate = std::function<absl::StatusOr<bool>(const Element&)>;

struct BatchOptions {
  // Drop a last batch with fewer than batch_size elements.
  bool drop_remainder = false;
  int64_t num_parallel_calls = 0;  // 0 or 1: sequential; -1: one per core
  bool deterministic = true;
};

// Which of how many consumers restores a job checkpoint: the consumers of
// a restored job share what is left of the epoch, however many saved it.
struct RestoreOptions {
  int64_t consumer_index = 0;
  int64_t num_consumers = 1;
};

// bucket_by_sequence_length's options beyond its buckets (tf.data's
// arguments). The length is `length_fn`'s integer scalar (a registered
// function, with `length_fn_args`) when set, else the first dimension of
// component `component`.
struct BucketOptions {
  std::string length_fn;
  FunctionArgMap length_fn_args;
  int64_t component = 0;
  // As PaddedBatch's.
  std::vector<std::vector<int64_t>> padded_shapes;
  std::vector<Tensor> padding_values;
  bool pad_to_bucket_boundary = false;
  bool no_padding = false;
  bool drop_remainder = false;
};

class Dataset {
 public:
  // Sources.
  static Dataset Range(int64_t stop);
  static Dataset Range(int64_t start, int64_t stop, int64_t step = 1);
  static Dataset FromTensors(std::vector<Tensor> components, std::vector<std::string> names = {});
  static Dataset FromTensorSlices(std::vector<Tensor> components, std::vector<std::string> names = {});
  static Dataset ListFiles(std::vector<std::string> patterns, bool shuffle = true,
                           std::optional<int64_t> seed = std::nullopt);
  // torchvision's ImageFolder layout, root/CLASS/FILE: {image: the file's
  // bytes, label: the class folder's index in sorted order, path}.
  // Empty extensions: jpg, jpeg and png. `shuffle` reorders the files each
  // epoch (seeded: reproducibly), as ListFiles does.
  static Dataset ImageFolder(std::string root, std::vector<std::string> extensions = {}, bool shuffle = false,
                             std::optional<int64_t> seed = std::nullopt);
  // POSIX tar shards in the WebDataset convention: one named element per
  // sample, {__key__, EXT: bytes, ...}; empty keys: the first sample's.
  static Dataset WebDataset(std::vector<std::string> files, std::vector<std::string> keys = {});
  static Dataset TextLine(std::vector<std::string> files, std::string compression_type = "");
  static Dataset TFRecord(std::vector<std::string> files, std::string compression_type = "");
  static Dataset FixedLengthRecord(std::vector<std::string> files, int64_t record_bytes,
                                   int64_t header_bytes = 0, int64_t footer_bytes = 0,
                                   std::string compression_type = "");
  static Dataset Zip(const std::vector<Dataset>& datasets);
  // JSON-lines files: one element per line, one component per field,
  // named after it. Without `field_types` each is a string (a JSON string
  // as its text, any other value as its JSON); with one type per field,
  // "string", "bool", "int32", "int64", "float32", "float64", or a numeric
  // type with "[]" for an array of numbers. A malformed line is DataLoss
  // naming the file and line; a value of the wrong type InvalidArgument
  // naming the file, line and field.
  static Dataset JsonLines(std::vector<std::string> files, std::vector<std::string> fields,
                           std::string compression_type = "", std::vector<std::string> field_types = {});
  // tf.data's sample_from_datasets: each element from one of `datasets`,
  // picked at random with `weights` (normalised; empty: equal). When one
  // ends, the result ends if `stop_on_empty_dataset`, else the others go on
  // with their weights renormalised. Without a seed each build draws one.
  static Dataset SampleFromDatasets(const std::vector<Dataset>& datasets, std::vector<double> weights = {},
                                    std::optional<int64_t> seed = std::nullopt,
                                    bool stop_on_empty_dataset = false);
  // The same with the weights read from `weights_file` (numbers separated
  // by spaces, commas or new lines) when an iterator starts and at each
  // restore: a restore goes on from its position with the file's weights
  // of then.
  static Dataset SampleFromDatasetsWithWeightsFile(const std::vector<Dataset>& datasets,
                                                   std::string weights_file,
                                                   std::optional<int64_t> seed = std::nullopt,
                                                   bool stop_on_empty_dataset = false);
  // tf.data's choose_from_datasets: the next element of datasets[i] for each
  // int64 scalar i of `choice_pipeline`; an index out of range is
  // InvalidArgument. A choice of an input that ended ends the result if
  // `stop_on_empty_dataset`, else is skipped.
  static Dataset ChooseFromDatasets(const std::vector<Dataset>& datasets, const Dataset& choice_pipeline,
                                    bool stop_on_empty_dataset = true);
  // A definition saved with Serialize (the service's DatasetDef message);
  // InvalidArgument when the bytes are not one.
  static absl::StatusOr<Dataset> Deserialize(std::string_view bytes);
  // A YAML pipeline file (docs/pipeline.md): its plugins, and data paths
  // relative to the file's folder. Errors, now and when the pipeline is
  // built, name the file, line and column.
  static absl::StatusOr<Dataset> FromYamlFile(const std::string& path);

  // Transforms, each returning a new Dataset.
  Dataset Map(const std::string& fn, const FunctionArgMap& args = {}, MapOptions options = {}) const;
  Dataset Filter(const std::string& fn, const FunctionArgMap& args = {}) const;
  // The elements before the first for which `predicate` (a registered
  // function of one bool scalar) is false.
  Dataset TakeWhile(const std::string& predicate, const FunctionArgMap& args = {}) const;
  // `output_spec` declares what `fn` returns (Spec(), and the steps after
  // it that check their input when the pipeline is built); without it the
  // spec is unknown: no components. Elements that break a declared spec
  // are an error; named components come in the names' sorted order. Any
  // function declares its output with an "output_spec" argument
  // (ParseOutputSpec's forms): a py: function's, whose output is known only
  // when it runs. `fn` must be thread-safe when num_parallel_calls > 1.
  Dataset MapLocal(LocalMapFunction fn, std::optional<ElementSpec> output_spec = std::nullopt,
                   MapOptions options = {}) const;
  Dataset FilterLocal(LocalPredicate predicate) const;
  Dataset Batch(int64_t batch_size, BatchOptions options = {}) const;
  // padded_shapes: one per component, -1 for "longest in the batch"; empty
  // pads every dimension that way. padding_values: one scalar per component.
  Dataset PaddedBatch(int64_t batch_size, const std::vector<std::vector<int64_t>>& padded_shapes = {},
                      const std::vector<Tensor>& padding_values = {}, bool drop_remainder = false) const;
  Dataset Unbatch() const;
  Dataset Rebatch(int64_t batch_size, bool drop_remainder = false) const;
  Dataset Shuffle(int64_t buffer_size, std::optional<int64_t> seed = std::nullopt,
                  bool reshuffle_each_iteration = true) const;
  Dataset Repeat(int64_t count = -1) const;
  Dataset Take(int64_t count) const;
  Dataset Skip(int64_t count) const;
  Dataset Shard(int64_t num_shards, int64_t index) const;
  Dataset Enumerate(int64_t start = 0) const;
  // `per_element` is the sub-pipeline for each input element; its file
  // source lists no files and reads them from the element.
  Dataset Interleave(const Dataset& per_element, int64_t cycle_length = 4, int64_t block_length = 1,
                     int64_t num_parallel_calls = 0) const;
  // Each input element's sub-pipeline, read to its end before the next
  // element's: Interleave with cycle_length 1.
  Dataset FlatMap(const Dataset& per_element) const;
  // This dataset's elements, then `pipeline`'s; their specs must be
  // compatible (same components, names and dtypes).
  Dataset Concatenate(const Dataset& pipeline) const;
  // Drops the elements seen before (one scalar int32, int64 or string
  // component).
  Dataset Unique() const;
  // Carries a state through the elements: `fn`, a registered function of
  // (state, element) -> (new state, output) such as "accumulate", is called
  // on the state's components followed by the element's, starting from
  // `initial_state` (one tensor per state component).
  Dataset Scan(const std::string& fn, std::vector<Tensor> initial_state,
               const FunctionArgMap& args = {}) const;
  // Windows of `size` elements starting every `shift` (0: size), taking
  // every `stride`-th; each window is one element, its components stacked,
  // which a FlatMap whose source is FromTensorSlices({}) reads row by row.
  Dataset Window(int64_t size, int64_t shift = 0, int64_t stride = 1, bool drop_remainder = false) const;
  // Keeps the first complete pass in memory (`filename` empty; at most
  // `max_bytes`, 0: 1 GiB) or in files at `filename`, and reads every
  // later pass from there without running the steps before it.
  Dataset Cache(const std::string& filename = "", int64_t max_bytes = 0) const;
  // Windows of up to `window_size` elements with the same key, the integer
  // scalar `key_fn` returns; each window is one element, its components
  // stacked, as Window's.
  Dataset GroupByWindow(const std::string& key_fn, int64_t window_size,
                        const FunctionArgMap& key_fn_args = {}) const;
  // Batches of elements of similar length: bucket i takes the lengths in
  // [bucket_boundaries[i-1], bucket_boundaries[i]) and batches
  // bucket_batch_sizes[i] of them (one more size than boundaries), padded
  // as PaddedBatch pads.
  Dataset BucketBySequenceLength(std::vector<int64_t> bucket_boundaries,
                                 std::vector<int64_t> bucket_batch_sizes,
                                 const BucketOptions& options = {}) const;
  Dataset Prefetch(int64_t buffer_size = -1) const;
  // Drops the elements whose computation failed (a corrupt image), counting
  // them; unless `quiet`, the first error and the count go to stderr.
  Dataset IgnoreErrors(bool quiet = false) const;
  // Text for language models. Tokenize: string component `component`
  // becomes an int32 vector of the SentencePiece model's token ids (the
  // model file: on a worker, under its data_roots), on num_parallel_calls
  // threads as Map (the order stays the input's). PackSequences: int32
  // or int64 vectors packed into rows of `length` tokens, {tokens,
  // segment_ids, positions}; method "first_fit" or "best_fit", num_bins
  // rows open at once (0: 8).
  Dataset Tokenize(std::string model, int64_t component = 0, bool add_bos = false, bool add_eos = false,
                   int64_t num_parallel_calls = 0) const;
  Dataset PackSequences(int64_t length, std::string method = "first_fit", int64_t component = 0,
                        int64_t padding_value = 0, int64_t num_bins = 0) const;
  // The steps so far run on the data service (the pipeline's `distribute`
  // step); the steps after run in this process.
  Dataset ReadFromService(const ServiceOptions& options) const;
  // Loads element functions from a plugin library when built.
  Dataset WithPlugin(const std::string& library_path) const;

  // OK, or InvalidArgument naming the first map or filter step that runs a
  // local function (MapLocal, FilterLocal), which only this process can
  // run: what ReadFromService over this dataset would fail with.
  absl::Status CheckRunsOnService() const;
  // True when a ReadFromService step names a job (job_name), whose
  // consumers share its elements rather than each reading them all.
  bool ReadsNamedJob() const;
  // True when the pipeline has a ReadFromService (distribute) step.
  bool ReadsFromService() const;
  // OK when the pipeline gives its elements in the same order on every run,
  // so that several processes can shard it by element; FailedPrecondition
  // naming the step that may reorder them (an unseeded shuffle, a parallel
  // step with deterministic: false).
  absl::Status CheckRepeatableOrder() const;
  // The repetition of its named job that the next iterator reads. Each
  // iterator takes the next one, as in tf.data, counted by this dataset,
  // its copies and the datasets made from it by adding steps; a
  // deserialized definition counts from 0 (Python's pickling carries it).
  int64_t NextReadRepetition() const;
  void SetNextReadRepetition(int64_t repetition) const;
  // The same pipeline read as one of several peers in one trainer
  // (DataLoader worker processes, DDP ranks) that split each repetition of
  // one job, `epoch_key` (non-empty) naming the epoch they read together:
  // the distribute step gets `job_name` unless it names one; a repetition
  // that peers with this key read to its end before this reader joined is
  // empty for it, and one finished under another key is skipped for the
  // next, as is one still running under another key when the job is
  // `job_name`, theirs alone (for a reader that is no peer, a finished
  // repetition is FailedPrecondition). Shares this dataset's repetition
  // counter.
  Dataset ReadAsPeer(const std::string& job_name, const std::string& epoch_key) const;

  // The definition's fingerprint: equal for equal pipelines, YAML or not.
  std::string Fingerprint() const;
  // The definition as bytes, for Deserialize.
  std::string Serialize() const;

  // The spec of the pipeline's elements, and how many there are
  // (kInfiniteCardinality, kUnknownCardinality); both build the pipeline,
  // which registers a pipeline that reads from the service with its
  // dispatcher.
  absl::StatusOr<ElementSpec> Spec() const;
  absl::StatusOr<int64_t> Cardinality() const;
  // OK when an iterator of this dataset can be saved and restored exactly
  // (Iterator::Save); otherwise FailedPrecondition naming the step that
  // prevents it and what would. From the definition alone, without
  // contacting the service, so that a trainer hears it before it trains
  // rather than at its first save. A plugin's op is known only at the save.
  absl::Status CheckSavable() const;

  // Builds the pipeline and starts reading it (for a pipeline that reads
  // from the service, a new iteration of its job).
  absl::StatusOr<Iterator> MakeIterator() const;
  // The same, going on from where the iterator that wrote `restore_from`
  // (Iterator::Save) stood: the elements it gave before the save, then the
  // ones this gives, equal one uninterrupted run. A state saved by another
  // pipeline (another fingerprint) is FailedPrecondition; an op that cannot
  // restore yet is Unimplemented naming its step.
  absl::StatusOr<Iterator> MakeIterator(const std::string& restore_from) const;
  // The same for a job checkpoint (MergeSavedStates), as consumer
  // `options.consumer_index` of `options.num_consumers` reading the rest of
  // the epoch together (docs/design.md, "Iterator checkpoints").
  absl::StatusOr<Iterator> MakeIterator(const std::string& restore_from, const RestoreOptions& options) const;
  // Runs the pipeline and returns its elements (at most `limit` when
  // limit >= 0).
  absl::StatusOr<std::vector<Element>> Collect(int64_t limit = -1) const;

 private:
  friend struct internal::DatasetAccess;
  explicit Dataset(std::shared_ptr<const internal::DatasetDefinition> definition);
  std::shared_ptr<const internal::DatasetDefinition> definition_;
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_DATASET_H_
