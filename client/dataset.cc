#include "sluice/dataset.h"

#include "client/data_service_dataset.h"
#include "common/proto_convert.h"
#include "pipeline/builder.h"

namespace sluice {

FunctionArg::FunctionArg(std::vector<FunctionArg> values) {
  proto_.mutable_list();  // an empty list is still a list
  for (const FunctionArg& v : values) *proto_.mutable_list()->add_values() = v.proto();
}

FunctionArg::FunctionArg(std::map<std::string, FunctionArg> entries) {
  proto_.mutable_map();
  auto* map = proto_.mutable_map()->mutable_entries();
  for (const auto& [key, value] : entries) (*map)[key] = value.proto();
}

template <typename Edit>
Dataset Dataset::With(const char* op, Edit edit) const {
  proto::DatasetDef def = def_;
  // NewStep only fails for unknown op names, and these are all known.
  proto::Step* step = def.add_steps();
  *step = *NewStep(op);
  edit(*step);
  return Dataset(std::move(def));
}

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
  for (const auto& [key, value] : args) (*def->mutable_args())[key] = value.proto();
}

}  // namespace

Dataset Dataset::Range(int64_t stop) { return Range(0, stop, 1); }

Dataset Dataset::Range(int64_t start, int64_t stop, int64_t step) {
  return Dataset(proto::DatasetDef()).With("range", [&](proto::Step& s) {
    s.mutable_range()->set_start(start);
    s.mutable_range()->set_stop(stop);
    s.mutable_range()->set_step(step);
  });
}

Dataset Dataset::FromTensors(std::vector<Tensor> components, std::vector<std::string> names) {
  return Dataset(proto::DatasetDef()).With("from_tensors", [&](proto::Step& s) {
    AddTensors(components, names, s.mutable_from_tensors()->mutable_components(),
               s.mutable_from_tensors()->mutable_names());
  });
}

Dataset Dataset::FromTensorSlices(std::vector<Tensor> components, std::vector<std::string> names) {
  return Dataset(proto::DatasetDef()).With("from_tensor_slices", [&](proto::Step& s) {
    AddTensors(components, names, s.mutable_from_tensor_slices()->mutable_components(),
               s.mutable_from_tensor_slices()->mutable_names());
  });
}

Dataset Dataset::ListFiles(std::vector<std::string> patterns, bool shuffle, std::optional<int64_t> seed) {
  return Dataset(proto::DatasetDef()).With("list_files", [&](proto::Step& s) {
    AddStrings(patterns, s.mutable_list_files()->mutable_pattern());
    s.mutable_list_files()->set_shuffle(shuffle);
    if (seed.has_value()) s.mutable_list_files()->set_seed(*seed);
  });
}

Dataset Dataset::TextLine(std::vector<std::string> files, std::string compression_type) {
  return Dataset(proto::DatasetDef()).With("text_line", [&](proto::Step& s) {
    AddStrings(files, s.mutable_text_line()->mutable_files());
    s.mutable_text_line()->set_compression_type(compression_type);
  });
}

Dataset Dataset::TFRecord(std::vector<std::string> files, std::string compression_type) {
  return Dataset(proto::DatasetDef()).With("tfrecord", [&](proto::Step& s) {
    AddStrings(files, s.mutable_tfrecord()->mutable_files());
    s.mutable_tfrecord()->set_compression_type(compression_type);
  });
}

Dataset Dataset::FixedLengthRecord(std::vector<std::string> files, int64_t record_bytes, int64_t header_bytes,
                                   int64_t footer_bytes, std::string compression_type) {
  return Dataset(proto::DatasetDef()).With("fixed_length_record", [&](proto::Step& s) {
    auto* op = s.mutable_fixed_length_record();
    AddStrings(files, op->mutable_files());
    op->set_record_bytes(record_bytes);
    op->set_header_bytes(header_bytes);
    op->set_footer_bytes(footer_bytes);
    op->set_compression_type(compression_type);
  });
}

Dataset Dataset::Zip(const std::vector<Dataset>& datasets) {
  return Dataset(proto::DatasetDef()).With("zip", [&](proto::Step& s) {
    for (const Dataset& d : datasets) *s.mutable_zip()->add_datasets() = d.def();
  });
}

Dataset Dataset::FromDef(proto::DatasetDef def) { return Dataset(std::move(def)); }

Dataset Dataset::Map(const std::string& fn, const FunctionArgMap& args, MapOptions options) const {
  return With("map", [&](proto::Step& s) {
    SetFunction(fn, args, s.mutable_map()->mutable_fn());
    s.mutable_map()->set_num_parallel_calls(options.num_parallel_calls);
    s.mutable_map()->set_deterministic(options.deterministic);
  });
}

Dataset Dataset::Filter(const std::string& fn, const FunctionArgMap& args) const {
  return With("filter", [&](proto::Step& s) { SetFunction(fn, args, s.mutable_filter()->mutable_fn()); });
}

Dataset Dataset::Batch(int64_t batch_size, bool drop_remainder, int64_t num_parallel_calls,
                       bool deterministic) const {
  return With("batch", [&](proto::Step& s) {
    s.mutable_batch()->set_batch_size(batch_size);
    s.mutable_batch()->set_drop_remainder(drop_remainder);
    s.mutable_batch()->set_num_parallel_calls(num_parallel_calls);
    s.mutable_batch()->set_deterministic(deterministic);
  });
}

Dataset Dataset::PaddedBatch(int64_t batch_size, const std::vector<std::vector<int64_t>>& padded_shapes,
                             const std::vector<Tensor>& padding_values, bool drop_remainder) const {
  return With("padded_batch", [&](proto::Step& s) {
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
  return With("unbatch", [](proto::Step&) {});
}

Dataset Dataset::Rebatch(int64_t batch_size, bool drop_remainder) const {
  return With("rebatch", [&](proto::Step& s) {
    s.mutable_rebatch()->set_batch_size(batch_size);
    s.mutable_rebatch()->set_drop_remainder(drop_remainder);
  });
}

Dataset Dataset::Shuffle(int64_t buffer_size, std::optional<int64_t> seed,
                         bool reshuffle_each_iteration) const {
  return With("shuffle", [&](proto::Step& s) {
    s.mutable_shuffle()->set_buffer_size(buffer_size);
    if (seed.has_value()) s.mutable_shuffle()->set_seed(*seed);
    s.mutable_shuffle()->set_reshuffle_each_iteration(reshuffle_each_iteration);
  });
}

Dataset Dataset::Repeat(int64_t count) const {
  return With("repeat", [&](proto::Step& s) { s.mutable_repeat()->set_count(count); });
}

Dataset Dataset::Take(int64_t count) const {
  return With("take", [&](proto::Step& s) { s.mutable_take()->set_count(count); });
}

Dataset Dataset::Skip(int64_t count) const {
  return With("skip", [&](proto::Step& s) { s.mutable_skip()->set_count(count); });
}

Dataset Dataset::Shard(int64_t num_shards, int64_t index) const {
  return With("shard", [&](proto::Step& s) {
    s.mutable_shard()->set_num_shards(num_shards);
    s.mutable_shard()->set_index(index);
  });
}

Dataset Dataset::Enumerate(int64_t start) const {
  return With("enumerate", [&](proto::Step& s) { s.mutable_enumerate()->set_start(start); });
}

Dataset Dataset::Interleave(const Dataset& per_element, int64_t cycle_length, int64_t block_length,
                            int64_t num_parallel_calls) const {
  return With("interleave", [&](proto::Step& s) {
    auto* op = s.mutable_interleave();
    *op->mutable_pipeline() = per_element.def();
    op->set_cycle_length(cycle_length);
    op->set_block_length(block_length);
    op->set_num_parallel_calls(num_parallel_calls);
  });
}

Dataset Dataset::Prefetch(int64_t buffer_size) const {
  return With("prefetch", [&](proto::Step& s) { s.mutable_prefetch()->set_buffer_size(buffer_size); });
}

Dataset Dataset::Distribute(const std::string& service, const std::string& mode, const std::string& job_name,
                            int64_t max_outstanding_requests, int64_t timeout_ms) const {
  return With("distribute", [&](proto::Step& s) {
    auto* op = s.mutable_distribute();
    op->set_service(service);
    op->set_processing_mode(mode);
    op->set_job_name(job_name);
    op->set_max_outstanding_requests(max_outstanding_requests);
    op->set_timeout_ms(timeout_ms);
  });
}

Dataset Dataset::Distribute(const proto::DistributeOp& op) const {
  return With("distribute", [&](proto::Step& s) { *s.mutable_distribute() = op; });
}

Dataset Dataset::WithPlugin(const std::string& library_path) const {
  proto::DatasetDef def = def_;
  def.add_plugins(library_path);
  return Dataset(std::move(def));
}

std::string Dataset::Fingerprint() const { return DatasetFingerprint(def_); }

absl::StatusOr<DatasetPtr> Dataset::Build() const {
  EnableDataService();
  return BuildDataset(def_);
}

absl::StatusOr<std::vector<Element>> Dataset::Collect(int64_t limit) const {
  absl::StatusOr<DatasetPtr> dataset = Build();
  if (!dataset.ok()) return dataset.status();
  return CollectElements(**dataset, IteratorContext{}, limit);
}

}  // namespace sluice
