#include "sluice/dataset.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "client/local_functions.h"
#include "client/read/definition_checks.h"
#include "common/proto_convert.h"
#include "pipeline/builder.h"
#include "pipeline/declared_spec.h"
#include "pipeline/iterator_state.h"
#include "pipeline/pipeline_restore.h"
#include "pipeline/yaml_loader.h"
#include "service/job_params.h"

namespace sluice {
namespace internal {

Dataset DatasetAccess::FromDefinition(proto::DatasetDef def) {
  DatasetDefinition state;
  state.def = std::move(def);
  return FromState(std::move(state));
}

Dataset DatasetAccess::FromState(DatasetDefinition state) {
  return Dataset(std::make_shared<const DatasetDefinition>(std::move(state)));
}

}  // namespace internal

using internal::DatasetAccess;

namespace {

std::shared_ptr<const internal::FunctionArgValue> ArgOf(proto::AttrValue proto) {
  auto value = std::make_shared<internal::FunctionArgValue>();
  value->proto = std::move(proto);
  return value;
}

template <typename Set>
std::shared_ptr<const internal::FunctionArgValue> ArgSetBy(Set set) {
  proto::AttrValue proto;
  set(proto);
  return ArgOf(std::move(proto));
}

}  // namespace

FunctionArg::FunctionArg(int value) : FunctionArg(int64_t{value}) {}
FunctionArg::FunctionArg(int64_t value) : value_(ArgSetBy([&](proto::AttrValue& p) { p.set_i(value); })) {}
FunctionArg::FunctionArg(double value) : value_(ArgSetBy([&](proto::AttrValue& p) { p.set_f(value); })) {}
FunctionArg::FunctionArg(bool value) : value_(ArgSetBy([&](proto::AttrValue& p) { p.set_b(value); })) {}
FunctionArg::FunctionArg(const char* value) : FunctionArg(std::string(value)) {}
FunctionArg::FunctionArg(std::string value)
    : value_(ArgSetBy([&](proto::AttrValue& p) { p.set_s(std::move(value)); })) {}

FunctionArg::FunctionArg(std::vector<FunctionArg> values)
    : value_(ArgSetBy([&](proto::AttrValue& p) {
        p.mutable_list();  // an empty list is still a list
        for (const FunctionArg& v : values) *p.mutable_list()->add_values() = DatasetAccess::Proto(v);
      })) {}

FunctionArg::FunctionArg(std::map<std::string, FunctionArg> entries)
    : value_(ArgSetBy([&](proto::AttrValue& p) {
        auto* map = p.mutable_map()->mutable_entries();
        for (const auto& [key, value] : entries) (*map)[key] = DatasetAccess::Proto(value);
      })) {}

Dataset::Dataset(std::shared_ptr<const internal::DatasetDefinition> definition)
    : definition_(std::move(definition)) {}

namespace {

// `dataset`'s definition with one more step, `op` with its defaults, edited
// by `edit`.
// `base` with one more step, `op` with its defaults, edited by `edit`; a
// YAML pipeline's step locations stay with its steps.
template <typename Edit>
Dataset With(const internal::DatasetDefinition& base, const char* op, Edit edit) {
  internal::DatasetDefinition next = base;
  // NewStep only fails for unknown op names, and these are all known.
  proto::Step* step = next.def.add_steps();
  *step = *NewStep(op);
  edit(*step);
  // A step added in code has no place in the file.
  if (!next.step_locations.empty()) next.step_locations.push_back("");
  return DatasetAccess::FromState(std::move(next));
}

template <typename Edit>
Dataset Source(const char* op, Edit edit) {
  return With(internal::DatasetDefinition(), op, edit);
}

}  // namespace

namespace {

void AddTensors(const std::vector<Tensor>& components, const std::vector<std::string>& names,
                google::protobuf::RepeatedPtrField<proto::TensorProto>* out,
                google::protobuf::RepeatedPtrField<std::string>* out_names) {
  for (const Tensor& t : components) TensorToProto(t, out->Add());
  for (const std::string& name : names) *out_names->Add() = name;
}

void AddStrings(const std::vector<std::string>& values,
                google::protobuf::RepeatedPtrField<std::string>* out) {
  for (const std::string& v : values) *out->Add() = v;
}

void SetFunction(const std::string& fn, const FunctionArgMap& args, proto::FunctionDef* def) {
  def->set_name(fn);
  for (const auto& [key, value] : args) (*def->mutable_args())[key] = DatasetAccess::Proto(value);
}

}  // namespace

Dataset Dataset::Range(int64_t stop) { return Range(0, stop, 1); }

Dataset Dataset::Range(int64_t start, int64_t stop, int64_t step) {
  return Source("range", [&](proto::Step& s) {
    s.mutable_range()->set_start(start);
    s.mutable_range()->set_stop(stop);
    s.mutable_range()->set_step(step);
  });
}

Dataset Dataset::FromTensors(std::vector<Tensor> components, std::vector<std::string> names) {
  return Source("from_tensors", [&](proto::Step& s) {
    AddTensors(components, names, s.mutable_from_tensors()->mutable_components(),
               s.mutable_from_tensors()->mutable_names());
  });
}

Dataset Dataset::FromTensorSlices(std::vector<Tensor> components, std::vector<std::string> names) {
  return Source("from_tensor_slices", [&](proto::Step& s) {
    AddTensors(components, names, s.mutable_from_tensor_slices()->mutable_components(),
               s.mutable_from_tensor_slices()->mutable_names());
  });
}

Dataset Dataset::ListFiles(std::vector<std::string> patterns, bool shuffle, std::optional<int64_t> seed) {
  return Source("list_files", [&](proto::Step& s) {
    AddStrings(patterns, s.mutable_list_files()->mutable_pattern());
    s.mutable_list_files()->set_shuffle(shuffle);
    if (seed.has_value()) s.mutable_list_files()->set_seed(*seed);
  });
}

Dataset Dataset::TextLine(std::vector<std::string> files, std::string compression_type) {
  return Source("text_line", [&](proto::Step& s) {
    AddStrings(files, s.mutable_text_line()->mutable_files());
    s.mutable_text_line()->set_compression_type(compression_type);
  });
}

Dataset Dataset::JsonLines(std::vector<std::string> files, std::vector<std::string> fields,
                           std::string compression_type, std::vector<std::string> field_types) {
  return Source("json_lines", [&](proto::Step& s) {
    AddStrings(files, s.mutable_json_lines()->mutable_files());
    AddStrings(fields, s.mutable_json_lines()->mutable_fields());
    s.mutable_json_lines()->set_compression_type(compression_type);
    AddStrings(field_types, s.mutable_json_lines()->mutable_field_types());
  });
}

Dataset Dataset::ImageFolder(std::string root, std::vector<std::string> extensions, bool shuffle,
                             std::optional<int64_t> seed) {
  return Source("image_folder", [&](proto::Step& s) {
    s.mutable_image_folder()->set_root(root);
    AddStrings(extensions, s.mutable_image_folder()->mutable_extensions());
    s.mutable_image_folder()->set_shuffle(shuffle);
    if (seed.has_value()) s.mutable_image_folder()->set_seed(*seed);
  });
}

Dataset Dataset::WebDataset(std::vector<std::string> files, std::vector<std::string> keys) {
  return Source("webdataset", [&](proto::Step& s) {
    AddStrings(files, s.mutable_webdataset()->mutable_files());
    AddStrings(keys, s.mutable_webdataset()->mutable_keys());
  });
}

Dataset Dataset::TFRecord(std::vector<std::string> files, std::string compression_type) {
  return Source("tfrecord", [&](proto::Step& s) {
    AddStrings(files, s.mutable_tfrecord()->mutable_files());
    s.mutable_tfrecord()->set_compression_type(compression_type);
  });
}

Dataset Dataset::FixedLengthRecord(std::vector<std::string> files, int64_t record_bytes, int64_t header_bytes,
                                   int64_t footer_bytes, std::string compression_type) {
  return Source("fixed_length_record", [&](proto::Step& s) {
    auto* op = s.mutable_fixed_length_record();
    AddStrings(files, op->mutable_files());
    op->set_record_bytes(record_bytes);
    op->set_header_bytes(header_bytes);
    op->set_footer_bytes(footer_bytes);
    op->set_compression_type(compression_type);
  });
}

Dataset Dataset::Zip(const std::vector<Dataset>& datasets) {
  return Source("zip", [&](proto::Step& s) {
    for (const Dataset& d : datasets) *s.mutable_zip()->add_datasets() = DatasetAccess::Definition(d);
  });
}

Dataset Dataset::SampleFromDatasets(const std::vector<Dataset>& datasets, std::vector<double> weights,
                                    std::optional<int64_t> seed, bool stop_on_empty_dataset) {
  return Source("sample_from_datasets", [&](proto::Step& s) {
    auto* op = s.mutable_sample_from_datasets();
    for (const Dataset& d : datasets) *op->add_datasets() = DatasetAccess::Definition(d);
    for (double w : weights) op->add_weights(w);
    if (seed.has_value()) op->set_seed(*seed);
    op->set_stop_on_empty_dataset(stop_on_empty_dataset);
  });
}

Dataset Dataset::SampleFromDatasetsWithWeightsFile(const std::vector<Dataset>& datasets,
                                                   std::string weights_file, std::optional<int64_t> seed,
                                                   bool stop_on_empty_dataset) {
  return Source("sample_from_datasets", [&](proto::Step& s) {
    auto* op = s.mutable_sample_from_datasets();
    for (const Dataset& d : datasets) *op->add_datasets() = DatasetAccess::Definition(d);
    op->set_weights_file(std::move(weights_file));
    if (seed.has_value()) op->set_seed(*seed);
    op->set_stop_on_empty_dataset(stop_on_empty_dataset);
  });
}

Dataset Dataset::ChooseFromDatasets(const std::vector<Dataset>& datasets, const Dataset& choice_pipeline,
                                    bool stop_on_empty_dataset) {
  return Source("choose_from_datasets", [&](proto::Step& s) {
    auto* op = s.mutable_choose_from_datasets();
    for (const Dataset& d : datasets) *op->add_datasets() = DatasetAccess::Definition(d);
    *op->mutable_choice_pipeline() = DatasetAccess::Definition(choice_pipeline);
    op->set_stop_on_empty_dataset(stop_on_empty_dataset);
  });
}

absl::StatusOr<Dataset> Dataset::Deserialize(std::string_view bytes) {
  proto::DatasetDef def;
  if (!def.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("these ", bytes.size(), " bytes are not a serialized dataset definition"));
  }
  return internal::DatasetFromDefinition(std::move(def));
}

Dataset Dataset::Map(const std::string& fn, const FunctionArgMap& args, MapOptions options) const {
  return With(DatasetAccess::State(*this), "map", [&](proto::Step& s) {
    SetFunction(fn, args, s.mutable_map()->mutable_fn());
    s.mutable_map()->set_num_parallel_calls(options.num_parallel_calls);
    s.mutable_map()->set_deterministic(options.deterministic);
  });
}

Dataset Dataset::Filter(const std::string& fn, const FunctionArgMap& args) const {
  return With(DatasetAccess::State(*this), "filter",
              [&](proto::Step& s) { SetFunction(fn, args, s.mutable_filter()->mutable_fn()); });
}

Dataset Dataset::TakeWhile(const std::string& predicate, const FunctionArgMap& args) const {
  return With(DatasetAccess::State(*this), "take_while", [&](proto::Step& s) {
    SetFunction(predicate, args, s.mutable_take_while()->mutable_predicate());
  });
}

Dataset Dataset::MapLocal(LocalMapFunction fn, std::optional<ElementSpec> output_spec,
                          MapOptions options) const {
  const Dataset made = Map(internal::RegisterLocalMap(std::move(fn)), {}, options);
  if (!output_spec.has_value()) return made;
  // Declared in the definition, as for any function (declared_spec.h).
  internal::DatasetDefinition next = DatasetAccess::State(made);
  proto::FunctionDef* declared =
      next.def.mutable_steps(next.def.steps_size() - 1)->mutable_map()->mutable_fn();
  (*declared->mutable_args())[kOutputSpecArg] = DeclaredSpecToAttr(*output_spec);
  return DatasetAccess::FromState(std::move(next));
}

Dataset Dataset::FilterLocal(LocalPredicate predicate) const {
  return Filter(internal::RegisterLocalPredicate(std::move(predicate)));
}

absl::Status Dataset::CheckRunsOnService() const {
  return reader::CheckNoLocalFunctions(DatasetAccess::Definition(*this));
}

int64_t Dataset::NextReadRepetition() const { return DatasetAccess::State(*this).read_repetitions->load(); }

void Dataset::SetNextReadRepetition(int64_t repetition) const {
  DatasetAccess::State(*this).read_repetitions->store(repetition);
}

Dataset Dataset::ReadAsPeer(const std::string& job_name, const std::string& epoch_key) const {
  internal::DatasetDefinition next = DatasetAccess::State(*this);
  for (proto::Step& step : *next.def.mutable_steps()) {
    if (!step.has_distribute()) continue;
    if (step.distribute().job_name().empty()) {
      step.mutable_distribute()->set_job_name(job_name);
      step.mutable_distribute()->set_peer_job_private(true);
    }
    step.mutable_distribute()->set_peer_epoch_key(epoch_key);
  }
  return DatasetAccess::FromState(std::move(next));
}

bool Dataset::ReadsFromService() const {
  for (const proto::Step& step : DatasetAccess::Definition(*this).steps()) {
    if (step.has_distribute()) return true;
  }
  return false;
}

absl::Status Dataset::CheckRepeatableOrder() const {
  return sluice::CheckRepeatableOrder(DatasetAccess::Definition(*this));
}

bool Dataset::ReadsNamedJob() const {
  for (const proto::Step& step : DatasetAccess::Definition(*this).steps()) {
    if (step.has_distribute() && !step.distribute().job_name().empty()) return true;
  }
  return false;
}

Dataset Dataset::Batch(int64_t batch_size, BatchOptions options) const {
  return With(DatasetAccess::State(*this), "batch", [&](proto::Step& s) {
    s.mutable_batch()->set_batch_size(batch_size);
    s.mutable_batch()->set_drop_remainder(options.drop_remainder);
    s.mutable_batch()->set_num_parallel_calls(options.num_parallel_calls);
    s.mutable_batch()->set_deterministic(options.deterministic);
  });
}

Dataset Dataset::PaddedBatch(int64_t batch_size, const std::vector<std::vector<int64_t>>& padded_shapes,
                             const std::vector<Tensor>& padding_values, bool drop_remainder) const {
  return With(DatasetAccess::State(*this), "padded_batch", [&](proto::Step& s) {
    auto* op = s.mutable_padded_batch();
    op->set_batch_size(batch_size);
    op->set_drop_remainder(drop_remainder);
    for (const auto& shape : padded_shapes) {
      auto* p = op->add_padded_shapes();
      for (int64_t d : shape) p->add_dims(d);
    }
    for (const Tensor& v : padding_values) TensorToProto(v, op->add_padding_values());
  });
}

Dataset Dataset::Unbatch() const {
  return With(DatasetAccess::State(*this), "unbatch", [](proto::Step&) {});
}

Dataset Dataset::Rebatch(int64_t batch_size, bool drop_remainder) const {
  return With(DatasetAccess::State(*this), "rebatch", [&](proto::Step& s) {
    s.mutable_rebatch()->set_batch_size(batch_size);
    s.mutable_rebatch()->set_drop_remainder(drop_remainder);
  });
}

Dataset Dataset::Shuffle(int64_t buffer_size, std::optional<int64_t> seed,
                         bool reshuffle_each_iteration) const {
  return With(DatasetAccess::State(*this), "shuffle", [&](proto::Step& s) {
    s.mutable_shuffle()->set_buffer_size(buffer_size);
    if (seed.has_value()) s.mutable_shuffle()->set_seed(*seed);
    s.mutable_shuffle()->set_reshuffle_each_iteration(reshuffle_each_iteration);
  });
}

Dataset Dataset::Repeat(int64_t count) const {
  return With(DatasetAccess::State(*this), "repeat",
              [&](proto::Step& s) { s.mutable_repeat()->set_count(count); });
}

Dataset Dataset::Take(int64_t count) const {
  return With(DatasetAccess::State(*this), "take",
              [&](proto::Step& s) { s.mutable_take()->set_count(count); });
}

Dataset Dataset::Skip(int64_t count) const {
  return With(DatasetAccess::State(*this), "skip",
              [&](proto::Step& s) { s.mutable_skip()->set_count(count); });
}

Dataset Dataset::Shard(int64_t num_shards, int64_t index) const {
  return With(DatasetAccess::State(*this), "shard", [&](proto::Step& s) {
    s.mutable_shard()->set_num_shards(num_shards);
    s.mutable_shard()->set_index(index);
  });
}

Dataset Dataset::Enumerate(int64_t start) const {
  return With(DatasetAccess::State(*this), "enumerate",
              [&](proto::Step& s) { s.mutable_enumerate()->set_start(start); });
}

Dataset Dataset::Interleave(const Dataset& per_element, int64_t cycle_length, int64_t block_length,
                            int64_t num_parallel_calls) const {
  return With(DatasetAccess::State(*this), "interleave", [&](proto::Step& s) {
    auto* op = s.mutable_interleave();
    *op->mutable_pipeline() = DatasetAccess::Definition(per_element);
    op->set_cycle_length(cycle_length);
    op->set_block_length(block_length);
    op->set_num_parallel_calls(num_parallel_calls);
  });
}

Dataset Dataset::FlatMap(const Dataset& per_element) const {
  return With(DatasetAccess::State(*this), "flat_map", [&](proto::Step& s) {
    *s.mutable_flat_map()->mutable_pipeline() = DatasetAccess::Definition(per_element);
  });
}

Dataset Dataset::Concatenate(const Dataset& pipeline) const {
  return With(DatasetAccess::State(*this), "concatenate", [&](proto::Step& s) {
    *s.mutable_concatenate()->mutable_pipeline() = DatasetAccess::Definition(pipeline);
  });
}

Dataset Dataset::Unique() const {
  return With(DatasetAccess::State(*this), "unique", [](proto::Step&) {});
}

Dataset Dataset::Scan(const std::string& fn, std::vector<Tensor> initial_state,
                      const FunctionArgMap& args) const {
  return With(DatasetAccess::State(*this), "scan", [&](proto::Step& s) {
    SetFunction(fn, args, s.mutable_scan()->mutable_fn());
    for (const Tensor& t : initial_state) TensorToProto(t, s.mutable_scan()->add_initial_state());
  });
}

Dataset Dataset::Window(int64_t size, int64_t shift, int64_t stride, bool drop_remainder) const {
  return With(DatasetAccess::State(*this), "window", [&](proto::Step& s) {
    auto* op = s.mutable_window();
    op->set_size(size);
    op->set_shift(shift);
    op->set_stride(stride);
    op->set_drop_remainder(drop_remainder);
  });
}

Dataset Dataset::Cache(const std::string& filename, int64_t max_bytes) const {
  return With(DatasetAccess::State(*this), "cache", [&](proto::Step& s) {
    s.mutable_cache()->set_filename(filename);
    s.mutable_cache()->set_max_bytes(max_bytes);
  });
}

Dataset Dataset::GroupByWindow(const std::string& key_fn, int64_t window_size,
                               const FunctionArgMap& key_fn_args) const {
  return With(DatasetAccess::State(*this), "group_by_window", [&](proto::Step& s) {
    SetFunction(key_fn, key_fn_args, s.mutable_group_by_window()->mutable_key_fn());
    s.mutable_group_by_window()->set_window_size(window_size);
  });
}

Dataset Dataset::BucketBySequenceLength(std::vector<int64_t> bucket_boundaries,
                                        std::vector<int64_t> bucket_batch_sizes,
                                        const BucketOptions& options) const {
  return With(DatasetAccess::State(*this), "bucket_by_sequence_length", [&](proto::Step& s) {
    auto* op = s.mutable_bucket_by_sequence_length();
    if (!options.length_fn.empty())
      SetFunction(options.length_fn, options.length_fn_args, op->mutable_length_fn());
    op->set_component(options.component);
    for (int64_t b : bucket_boundaries) op->add_bucket_boundaries(b);
    for (int64_t b : bucket_batch_sizes) op->add_bucket_batch_sizes(b);
    for (const auto& shape : options.padded_shapes) {
      auto* p = op->add_padded_shapes();
      for (int64_t d : shape) p->add_dims(d);
    }
    for (const Tensor& v : options.padding_values) TensorToProto(v, op->add_padding_values());
    op->set_pad_to_bucket_boundary(options.pad_to_bucket_boundary);
    op->set_no_padding(options.no_padding);
    op->set_drop_remainder(options.drop_remainder);
  });
}

Dataset Dataset::Prefetch(int64_t buffer_size) const {
  return With(DatasetAccess::State(*this), "prefetch",
              [&](proto::Step& s) { s.mutable_prefetch()->set_buffer_size(buffer_size); });
}

Dataset Dataset::IgnoreErrors(bool quiet) const {
  return With(DatasetAccess::State(*this), "ignore_errors",
              [&](proto::Step& s) { s.mutable_ignore_errors()->set_quiet(quiet); });
}

Dataset Dataset::Tokenize(std::string model, int64_t component, bool add_bos, bool add_eos,
                          int64_t num_parallel_calls) const {
  return With(DatasetAccess::State(*this), "tokenize", [&](proto::Step& s) {
    proto::TokenizeOp* op = s.mutable_tokenize();
    op->set_model(model);
    op->set_component(component);
    op->set_add_bos(add_bos);
    op->set_add_eos(add_eos);
    op->set_num_parallel_calls(num_parallel_calls);
  });
}

Dataset Dataset::PackSequences(int64_t length, std::string method, int64_t component, int64_t padding_value,
                               int64_t num_bins) const {
  return With(DatasetAccess::State(*this), "pack_sequences", [&](proto::Step& s) {
    proto::PackSequencesOp* op = s.mutable_pack_sequences();
    op->set_length(length);
    op->set_method(method);
    op->set_component(component);
    op->set_padding_value(padding_value);
    op->set_num_bins(num_bins);
  });
}

Dataset Dataset::ReadFromService(const ServiceOptions& options) const {
  return internal::ReadFromService(*this, internal::DistributeOpFromOptions(options));
}

Dataset Dataset::WithPlugin(const std::string& library_path) const {
  internal::DatasetDefinition next = DatasetAccess::State(*this);
  next.def.add_plugins(library_path);
  return DatasetAccess::FromState(std::move(next));
}

std::string Dataset::Fingerprint() const { return DatasetFingerprint(DatasetAccess::Definition(*this)); }

std::string Dataset::Serialize() const { return DatasetAccess::Definition(*this).SerializeAsString(); }

absl::StatusOr<Dataset> Dataset::FromYamlFile(const std::string& path) {
  // Not built on load: the steps before `distribute` may read files that
  // only the workers have. Building checks the rest.
  absl::StatusOr<LoadedPipeline> loaded = LoadPipelineFile(path, {.validate = false});
  if (!loaded.ok()) return loaded.status();
  internal::DatasetDefinition state;
  state.def = std::move(loaded->def);
  state.step_locations = std::move(loaded->step_locations);
  return DatasetAccess::FromState(std::move(state));
}

absl::StatusOr<ElementSpec> Dataset::Spec() const {
  absl::StatusOr<DatasetPtr> dataset = internal::BuildPipeline(*this);
  if (!dataset.ok()) return dataset.status();
  return (*dataset)->element_spec();
}

absl::StatusOr<int64_t> Dataset::Cardinality() const {
  absl::StatusOr<DatasetPtr> dataset = internal::BuildPipeline(*this);
  if (!dataset.ok()) return dataset.status();
  return (*dataset)->Cardinality();
}

absl::StatusOr<Iterator> Dataset::MakeIterator() const {
  absl::StatusOr<DatasetPtr> dataset = internal::BuildPipeline(*this);
  if (!dataset.ok()) return dataset.status();
  absl::StatusOr<std::unique_ptr<IteratorBase>> input = (*dataset)->MakeIterator(IteratorContext{});
  if (!input.ok()) return input.status();
  return DatasetAccess::MakeIterator(*std::move(dataset), *std::move(input),
                                     CheckpointFingerprint(DatasetAccess::Definition(*this)));
}

absl::StatusOr<Iterator> Dataset::MakeIterator(const std::string& restore_from) const {
  return MakeIterator(restore_from, RestoreOptions{});
}

absl::StatusOr<Iterator> Dataset::MakeIterator(const std::string& restore_from,
                                               const RestoreOptions& options) const {
  absl::StatusOr<DatasetPtr> dataset = internal::BuildPipeline(*this);
  if (!dataset.ok()) return dataset.status();
  const std::string fingerprint = CheckpointFingerprint(DatasetAccess::Definition(*this));
  absl::StatusOr<std::unique_ptr<IteratorBase>> input = RestoreIterator(
      **dataset, fingerprint, restore_from,
      RestoreAs{.num_consumers = options.num_consumers, .consumer_index = options.consumer_index});
  if (!input.ok()) return input.status();
  return DatasetAccess::MakeIterator(*std::move(dataset), *std::move(input), fingerprint);
}

absl::StatusOr<std::vector<Element>> Dataset::Collect(int64_t limit) const {
  absl::StatusOr<DatasetPtr> dataset = internal::BuildPipeline(*this);
  if (!dataset.ok()) return dataset.status();
  return CollectElements(**dataset, IteratorContext{}, limit);
}

namespace internal {

Dataset ReadFromService(const Dataset& dataset, const proto::DistributeOp& op) {
  return With(DatasetAccess::State(dataset), "distribute",
              [&](proto::Step& s) { *s.mutable_distribute() = op; });
}

absl::StatusOr<DatasetPtr> BuildPipeline(const Dataset& dataset) {
  const std::vector<std::string>& locations = DatasetAccess::State(dataset).step_locations;
  BuildOptions options;
  if (!locations.empty()) options.step_locations = &locations;
  options.read_repetitions = DatasetAccess::State(dataset).read_repetitions;
  return BuildDataset(DatasetAccess::Definition(dataset), options);
}

}  // namespace internal
}  // namespace sluice
