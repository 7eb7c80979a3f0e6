#include "pipeline/builder.h"

#include <dlfcn.h>

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/strings.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "pipeline/file_list_source.h"
#include "pipeline/function.h"
#include "pipeline/io/object_url.h"
#include "pipeline/ops.h"
#include "pipeline/python_function.h"
#include "pipeline/random.h"
#include "pipeline/sandbox.h"

namespace sluice {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

std::vector<std::string> FilesFromInput(const Element& input) {
  std::vector<std::string> files;
  for (const Tensor& t : input.components) {
    if (t.dtype() != DType::kString) continue;
    for (const std::string& f : t.values<std::string>()) files.push_back(f);
  }
  return files;
}

absl::StatusOr<FileSourceConfig> FileConfig(const proto::Step& step, const Element* input) {
  FileSourceConfig config;
  const google::protobuf::RepeatedPtrField<std::string>* files = nullptr;
  switch (step.op_case()) {
    case proto::Step::kTextLine:
      config.format = RecordFormat::kTextLine;
      files = &step.text_line().files();
      config.compression_type = step.text_line().compression_type();
      break;
    case proto::Step::kJsonLines:
      config.format = RecordFormat::kJsonLines;
      files = &step.json_lines().files();
      config.compression_type = step.json_lines().compression_type();
      config.fields.assign(step.json_lines().fields().begin(), step.json_lines().fields().end());
      config.field_types.assign(step.json_lines().field_types().begin(),
                                step.json_lines().field_types().end());
      break;
    case proto::Step::kTfrecord:
      config.format = RecordFormat::kTFRecord;
      files = &step.tfrecord().files();
      config.compression_type = step.tfrecord().compression_type();
      break;
    default: {
      const auto& op = step.fixed_length_record();
      config.format = RecordFormat::kFixedLength;
      files = &op.files();
      config.compression_type = op.compression_type();
      config.record_bytes = op.record_bytes();
      config.header_bytes = op.header_bytes();
      config.footer_bytes = op.footer_bytes();
    }
  }
  config.files.assign(files->begin(), files->end());
  if (config.files.empty() && input != nullptr) {
    config.files = FilesFromInput(*input);
    if (config.files.empty()) {
      return absl::InvalidArgumentError("the interleaved element has no string component to read files from");
    }
  }
  return config;
}

// A stand-in element of `spec`, for building an interleave's sub-pipeline
// once at build time to learn its spec. Unknown dimensions become 0.
Element PlaceholderElement(const ElementSpec& spec) {
  Element element;
  for (const TensorSpec& c : spec.components) {
    Shape shape;
    for (int64_t d : c.shape.dims) shape.push_back(d == kUnknownDim ? 0 : d);
    element.components.emplace_back(c.dtype, shape);
  }
  element.names = MakeNames(spec.names);
  return element;
}

// A sub-pipeline of a step (concatenate's, a choice pipeline), built with
// the element an enclosing interleave maps, if any; errors start with
// `what`.
absl::StatusOr<DatasetPtr> BuildSubPipeline(const proto::DatasetDef& def, const Element* input,
                                            const std::string& what) {
  if (def.steps().empty()) return absl::InvalidArgumentError(absl::StrCat(what, " has no steps"));
  BuildOptions sub;
  sub.input = input;
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(def, sub);
  if (!dataset.ok()) {
    return absl::Status(dataset.status().code(), absl::StrCat(what, ": ", dataset.status().message()));
  }
  return dataset;
}

// The `datasets` of sample_from_datasets and choose_from_datasets; errors
// name the dataset ("dataset 2: ...") as zip's do.
absl::StatusOr<std::vector<DatasetPtr>> BuildSubPipelines(
    const google::protobuf::RepeatedPtrField<proto::DatasetDef>& defs, const Element* input) {
  if (defs.empty()) return absl::InvalidArgumentError("'datasets' is empty; it needs at least one pipeline");
  std::vector<DatasetPtr> datasets;
  for (int i = 0; i < defs.size(); ++i) {
    absl::StatusOr<DatasetPtr> dataset =
        BuildSubPipeline(defs.Get(i), input, absl::StrCat("dataset ", i + 1));
    if (!dataset.ok()) return dataset.status();
    datasets.push_back(*std::move(dataset));
  }
  return datasets;
}

// interleave's and flat_map's sub-pipeline, built once for each input
// element, and its spec, learned by building it once here for a stand-in
// element of `input_spec`.
struct PerElementPipeline {
  SubDatasetFactory factory;
  ElementSpec spec;
};
absl::StatusOr<PerElementPipeline> MakePerElementPipeline(const ElementSpec& input_spec,
                                                          const proto::DatasetDef& sub_def, const char* op) {
  if (sub_def.steps().empty())
    return absl::InvalidArgumentError(absl::StrCat(op, ": 'pipeline' has no steps"));
  const Element placeholder = PlaceholderElement(input_spec);
  BuildOptions probe;
  probe.input = &placeholder;
  absl::StatusOr<DatasetPtr> probe_dataset = BuildDataset(sub_def, probe);
  if (!probe_dataset.ok()) {
    return absl::Status(probe_dataset.status().code(),
                        absl::StrCat(op, ": ", probe_dataset.status().message()));
  }
  SubDatasetFactory factory = [sub_def](const Element& element) {
    BuildOptions sub;
    sub.input = &element;
    return BuildDataset(sub_def, sub);
  };
  return PerElementPipeline{std::move(factory), (*probe_dataset)->element_spec()};
}

absl::StatusOr<DatasetPtr> BuildSource(const proto::Step& step, const BuildOptions& options) {
  switch (step.op_case()) {
    case proto::Step::kRange:
      return MakeRangeDataset(step.range());
    case proto::Step::kFromTensors:
      return MakeFromTensorsDataset(step.from_tensors());
    case proto::Step::kFromTensorSlices:
      return MakeFromTensorSlicesDataset(step.from_tensor_slices(), options.input);
    case proto::Step::kListFiles:
      return MakeListFilesDataset(step.list_files());
    case proto::Step::kImageFolder:
      return MakeImageFolderDataset(step.image_folder());
    case proto::Step::kWebdataset:
      return MakeWebDatasetDataset(step.webdataset());
    case proto::Step::kTextLine:
    case proto::Step::kJsonLines:
    case proto::Step::kTfrecord:
    case proto::Step::kFixedLengthRecord: {
      absl::StatusOr<FileSourceConfig> config = FileConfig(step, options.input);
      if (!config.ok()) return config.status();
      return MakeFileSourceDataset(*std::move(config));
    }
    case proto::Step::kZip: {
      std::vector<DatasetPtr> inputs;
      for (int i = 0; i < step.zip().datasets_size(); ++i) {
        BuildOptions sub;
        sub.input = options.input;
        absl::StatusOr<DatasetPtr> input = BuildDataset(step.zip().datasets(i), sub);
        if (!input.ok()) {
          return absl::Status(input.status().code(),
                              absl::StrCat("dataset ", i + 1, ": ", input.status().message()));
        }
        inputs.push_back(*std::move(input));
      }
      return MakeZipDataset(std::move(inputs));
    }
    case proto::Step::kSampleFromDatasets: {
      absl::StatusOr<std::vector<DatasetPtr>> inputs =
          BuildSubPipelines(step.sample_from_datasets().datasets(), options.input);
      if (!inputs.ok()) return inputs.status();
      return MakeSampleFromDatasetsDataset(*std::move(inputs), step.sample_from_datasets());
    }
    case proto::Step::kChooseFromDatasets: {
      const proto::ChooseFromDatasetsOp& op = step.choose_from_datasets();
      absl::StatusOr<std::vector<DatasetPtr>> inputs = BuildSubPipelines(op.datasets(), options.input);
      if (!inputs.ok()) return inputs.status();
      absl::StatusOr<DatasetPtr> choice =
          BuildSubPipeline(op.choice_pipeline(), options.input, "choice_pipeline");
      if (!choice.ok()) return choice.status();
      return MakeChooseFromDatasetsDataset(*std::move(inputs), *std::move(choice), op);
    }
    default:
      return absl::InvalidArgumentError("the first step must be a source");
  }
}

absl::StatusOr<DatasetPtr> BuildTransform(DatasetPtr input, const proto::Step& step,
                                          const BuildOptions& options) {
  switch (step.op_case()) {
    case proto::Step::kMap:
      return MakeMapDataset(std::move(input), step.map());
    case proto::Step::kFilter:
      return MakeFilterDataset(std::move(input), step.filter());
    case proto::Step::kTakeWhile:
      return MakeTakeWhileDataset(std::move(input), step.take_while());
    case proto::Step::kBatch:
      return MakeBatchDataset(std::move(input), step.batch());
    case proto::Step::kPaddedBatch:
      return MakePaddedBatchDataset(std::move(input), step.padded_batch());
    case proto::Step::kUnbatch:
      return MakeUnbatchDataset(std::move(input));
    case proto::Step::kRebatch:
      return MakeRebatchDataset(std::move(input), step.rebatch());
    case proto::Step::kShuffle:
      return MakeShuffleDataset(std::move(input), step.shuffle());
    case proto::Step::kRepeat:
      return MakeRepeatDataset(std::move(input), step.repeat());
    case proto::Step::kTake:
      return MakeTakeDataset(std::move(input), step.take());
    case proto::Step::kIgnoreErrors:
      return MakeIgnoreErrorsDataset(std::move(input), step.ignore_errors());
    case proto::Step::kSkip:
      return MakeSkipDataset(std::move(input), step.skip());
    case proto::Step::kShard:
      return MakeShardDataset(std::move(input), step.shard());
    case proto::Step::kEnumerate:
      return MakeEnumerateDataset(std::move(input), step.enumerate());
    case proto::Step::kPrefetch:
      return MakePrefetchDataset(std::move(input), step.prefetch());
    case proto::Step::kTokenize:
      return MakeTokenizeDataset(std::move(input), step.tokenize());
    case proto::Step::kPackSequences:
      return MakePackSequencesDataset(std::move(input), step.pack_sequences());
    case proto::Step::kInterleave: {
      absl::StatusOr<PerElementPipeline> sub =
          MakePerElementPipeline(input->element_spec(), step.interleave().pipeline(), "interleave");
      if (!sub.ok()) return sub.status();
      return MakeInterleaveDataset(std::move(input), step.interleave(), std::move(sub->factory),
                                   std::move(sub->spec));
    }
    case proto::Step::kFlatMap: {
      absl::StatusOr<PerElementPipeline> sub =
          MakePerElementPipeline(input->element_spec(), step.flat_map().pipeline(), "flat_map");
      if (!sub.ok()) return sub.status();
      return MakeFlatMapDataset(std::move(input), std::move(sub->factory), std::move(sub->spec));
    }
    case proto::Step::kConcatenate: {
      absl::StatusOr<DatasetPtr> other =
          BuildSubPipeline(step.concatenate().pipeline(), options.input, "concatenate: 'pipeline'");
      if (!other.ok()) return other.status();
      return MakeConcatenateDataset(std::move(input), *std::move(other));
    }
    case proto::Step::kUnique:
      return MakeUniqueDataset(std::move(input));
    case proto::Step::kScan:
      return MakeScanDataset(std::move(input), step.scan());
    case proto::Step::kWindow:
      return MakeWindowDataset(std::move(input), step.window());
    case proto::Step::kCache:  // BuildDataset's, which knows the steps before it
      return absl::InternalError("cache is built with the fingerprint of the steps before it");
    case proto::Step::kGroupByWindow:
      return MakeGroupByWindowDataset(std::move(input), step.group_by_window());
    case proto::Step::kBucketBySequenceLength:
      return MakeBucketBySequenceLengthDataset(std::move(input), step.bucket_by_sequence_length());
    default:
      return absl::InvalidArgumentError("a source can only be the first step");
  }
}

// Whether `map_step` followed by `batch_step` may run as batch then map.
bool MapCanFollowBatch(const proto::Step& map_step, const proto::Step& batch_step) {
  if (!map_step.has_map() || !batch_step.has_batch()) return false;
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn =
      FunctionRegistry::Global().Create(map_step.map().fn());
  return fn.ok() && (*fn)->IsElementwise();
}

// How many maps from step `i` on may run as one (MakeFusedMapDataset): the
// same num_parallel_calls and deterministic, stopping before a map that
// moves behind a following batch. 0 when step `i` is not a map.
int FusibleMapCount(const proto::DatasetDef& def, int i) {
  if (!def.steps(i).has_map()) return 0;
  const proto::MapOp& first = def.steps(i).map();
  int count = 1;
  for (int j = i + 1; j < def.steps_size() && def.steps(j).has_map(); ++j) {
    const proto::MapOp& next = def.steps(j).map();
    if (next.num_parallel_calls() != first.num_parallel_calls() ||
        next.deterministic() != first.deterministic()) {
      break;
    }
    if (j + 1 < def.steps_size() && MapCanFollowBatch(def.steps(j), def.steps(j + 1))) break;
    ++count;
  }
  return count;
}

}  // namespace

namespace {

absl::Mutex distribute_mu(absl::kConstInit);
DistributeFactory* distribute_factory ABSL_GUARDED_BY(distribute_mu) = nullptr;

absl::StatusOr<DatasetPtr> BuildDistribute(const proto::DatasetDef& def, int index,
                                           const BuildOptions& options) {
  DistributeFactory factory;
  {
    absl::MutexLock lock(&distribute_mu);
    if (distribute_factory == nullptr) {
      return absl::FailedPreconditionError(
          "this program cannot read from the data service (it does not link the Sluice client library)");
    }
    factory = *distribute_factory;
  }
  proto::DatasetDef worker_part;
  *worker_part.mutable_plugins() = def.plugins();
  for (int i = 0; i < index; ++i) *worker_part.add_steps() = def.steps(i);
  if (worker_part.steps().empty())
    return absl::InvalidArgumentError("nothing before it to run on the workers");
  return factory(worker_part, def.steps(index).distribute(),
                 options.read_repetitions != nullptr ? options.read_repetitions
                                                     : std::make_shared<std::atomic<int64_t>>(0));
}

}  // namespace

void SetDistributeFactory(DistributeFactory factory) {
  absl::MutexLock lock(&distribute_mu);
  delete distribute_factory;
  distribute_factory = new DistributeFactory(std::move(factory));
}

proto::DatasetDef WorkerPart(const proto::DatasetDef& def) {
  proto::DatasetDef part;
  *part.mutable_plugins() = def.plugins();
  for (const proto::Step& step : def.steps()) {
    if (step.has_distribute()) break;
    *part.add_steps() = step;
  }
  return part;
}

namespace {

// "file:line:column: " of step `i` when the definition came from YAML.
std::string StepLocation(const BuildOptions& options, int i) {
  if (options.step_locations == nullptr || i >= static_cast<int>(options.step_locations->size()) ||
      (*options.step_locations)[i].empty()) {
    return "";
  }
  return absl::StrCat((*options.step_locations)[i], ": ");
}

// The fingerprint of `def`'s steps before step `end`, with its plugins.
std::string StepsFingerprint(const proto::DatasetDef& def, int end) {
  proto::DatasetDef steps;
  *steps.mutable_plugins() = def.plugins();
  for (int i = 0; i < end; ++i) *steps.add_steps() = def.steps(i);
  return DatasetFingerprint(steps);
}

// What a step after a map whose output is unknown at build time needs.
std::string UndeclaredOutputAdvice(const proto::DatasetDef& def, int map_step) {
  const std::string& fn = def.steps(map_step).map().fn().name();
  const std::string what = fn == kClientFunctionName        ? "a shipped Python callable"
                           : absl::StartsWith(fn, "local:") ? "a function of this process"
                                                            : fn;
  return absl::StrCat("; the components of step ", map_step + 1, "'s output (map ", what,
                      ") are known only when it runs, so the steps after it see none: declare them with "
                      "output_spec, for example output_spec: {image: \"float32[?,?,3]\", label: int64} "
                      "(docs/pipeline.md, \"Python functions on the workers\")");
}

}  // namespace

absl::StatusOr<DatasetPtr> BuildDataset(const proto::DatasetDef& def, const BuildOptions& options) {
  for (const std::string& plugin : def.plugins()) {
    if (absl::Status status = RequirePlugin(plugin); !status.ok()) return status;
  }
  if (def.steps().empty()) return absl::InvalidArgumentError("the pipeline has no steps");
  // Everything before a `distribute` runs remotely; build from it on.
  int first = 0;
  for (int i = 0; i < def.steps_size(); ++i) {
    if (!def.steps(i).has_distribute()) continue;
    if (first > 0)
      return absl::InvalidArgumentError(
          absl::StrCat("step ", i + 1, " (distribute): a pipeline has one distribute step at most"));
    first = i;
  }
  DatasetPtr dataset;
  int undeclared_map = -1;  // the map whose output's components are unknown from here on
  for (int i = first; i < def.steps_size(); ++i) {
    const proto::Step& step = def.steps(i);
    const std::string op = StepOpName(step);
    absl::StatusOr<DatasetPtr> next;
    if (op.empty()) {
      next = absl::InvalidArgumentError("the step has no op");
    } else if (step.has_distribute()) {
      next = BuildDistribute(def, i, options);
    } else if (i == 0) {
      next = BuildSource(step, options);
    } else if (step.has_cache()) {
      next = MakeCacheDataset(dataset, step.cache(), StepsFingerprint(def, i));
    } else if (i + 1 < def.steps_size() && MapCanFollowBatch(step, def.steps(i + 1))) {
      // map(f) -> batch == batch -> map(f) for an elementwise f, and the
      // second runs f once per batch. Errors still name the map's step.
      absl::StatusOr<DatasetPtr> batched = BuildTransform(dataset, def.steps(i + 1), options);
      if (batched.ok()) next = BuildTransform(*std::move(batched), step, options);
      if (batched.ok() && next.ok()) {
        dataset = ContainExceptions(*std::move(next), absl::StrCat(StepLocation(options, i), "steps ", i + 1,
                                                                   "-", i + 2, " (", op, ", batch)"));
        ++i;
        continue;
      }
      next = BuildTransform(dataset, step, options);  // report errors in step order
    } else if (const int fused = FusibleMapCount(def, i); fused > 1) {
      std::vector<proto::MapOp> maps;
      for (int k = i; k < i + fused; ++k) maps.push_back(def.steps(k).map());
      absl::StatusOr<DatasetPtr> fused_map = MakeFusedMapDataset(dataset, maps);
      if (fused_map.ok()) {
        dataset = ContainExceptions(*std::move(fused_map), absl::StrCat(StepLocation(options, i), "steps ",
                                                                        i + 1, "-", i + fused, " (map)"));
        i += fused - 1;
        continue;
      }
      next = BuildTransform(dataset, step, options);  // report errors in step order
    } else {
      next = BuildTransform(dataset, step, options);
    }
    const std::string where = absl::StrCat(StepLocation(options, i), "step ", i + 1, " (", op, ")");
    if (!next.ok()) {
      // Op factories start their messages with the op's name, which the
      // step prefix already gives.
      absl::string_view message = next.status().message();
      absl::ConsumePrefix(&message, absl::StrCat(op, ": "));
      std::string advice;
      if (undeclared_map >= 0 && dataset->element_spec().components.empty()) {
        advice = UndeclaredOutputAdvice(def, undeclared_map);
      }
      return absl::Status(next.status().code(), absl::StrCat(where, ": ", message, advice));
    }
    // What a step's iterator throws (a failed allocation, a plugin's
    // exception) becomes its error, naming the step.
    dataset = ContainExceptions(*std::move(next), where);
    // No built-in function gives an element of no components: a function
    // whose output is known only when it runs (py:, a callable) did.
    if (dataset->element_spec().components.empty()) {
      if (step.has_map()) undeclared_map = i;
    } else {
      undeclared_map = -1;
    }
  }
  return dataset;
}

std::string DatasetFingerprint(const proto::DatasetDef& def) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    def.SerializeToCodedStream(&coded);
  }
  return Sha256Hex(bytes, 16);
}

absl::StatusOr<SourceSplitInfo> DescribeSourceSplits(const proto::Step& source) {
  SourceSplitInfo info;
  switch (source.op_case()) {
    case proto::Step::kRange:
    case proto::Step::kFromTensorSlices: {
      absl::StatusOr<DatasetPtr> dataset = BuildSource(source, {});
      if (!dataset.ok()) return dataset.status();
      info.num_positions = (*dataset)->Cardinality();
      return info;
    }
    case proto::Step::kListFiles: {
      absl::StatusOr<DatasetPtr> dataset = MakeListFilesDataset(source.list_files());
      if (!dataset.ok()) return dataset.status();
      info.num_positions = (*dataset)->Cardinality();
      info.per_file = true;
      info.object_listing = static_cast<const FileListDataset&>(**dataset).ObjectListingDigest();
      if (source.list_files().shuffle()) {
        info.shuffle_seed =
            source.list_files().has_seed() ? static_cast<uint64_t>(source.list_files().seed()) : RandomSeed();
      }
      return info;
    }
    case proto::Step::kImageFolder: {
      absl::StatusOr<DatasetPtr> dataset = MakeImageFolderDataset(source.image_folder());
      if (!dataset.ok()) return dataset.status();
      info.num_positions = (*dataset)->Cardinality();
      info.per_file = true;
      info.object_listing = static_cast<const FileListDataset&>(**dataset).ObjectListingDigest();
      if (source.image_folder().shuffle()) {
        info.shuffle_seed = source.image_folder().has_seed()
                                ? static_cast<uint64_t>(source.image_folder().seed())
                                : RandomSeed();
      }
      return info;
    }
    case proto::Step::kWebdataset:
      if (source.webdataset().files().empty())
        return absl::InvalidArgumentError("webdataset: missing 'files'");
      info.num_positions = source.webdataset().files_size();
      info.per_file = true;
      return info;
    case proto::Step::kTextLine:
    case proto::Step::kJsonLines:
    case proto::Step::kTfrecord:
    case proto::Step::kFixedLengthRecord: {
      absl::StatusOr<FileSourceConfig> config = FileConfig(source, nullptr);
      if (!config.ok()) return config.status();
      if (config->files.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat(StepOpName(source), " without 'files' reads from its input and cannot be split"));
      }
      info.num_positions = static_cast<int64_t>(config->files.size());
      info.per_file = true;
      return info;
    }
    default:
      return absl::FailedPreconditionError(absl::StrCat(
          "a pipeline whose source is '", StepOpName(source),
          "' cannot be split for distributed_epoch; start it with range, from_tensor_slices, list_files, "
          "image_folder, webdataset, text_line, json_lines, tfrecord or fixed_length_record"));
  }
}

bool SourceListsObjects(const proto::Step& source) {
  if (source.has_image_folder()) return io::HasUrlScheme(source.image_folder().root());
  if (source.has_list_files()) {
    for (const std::string& pattern : source.list_files().pattern()) {
      if (io::HasUrlScheme(pattern)) return true;
    }
  }
  return false;
}

namespace {
absl::Mutex plugins_mu(absl::kConstInit);
std::set<std::string>* loaded_plugins ABSL_GUARDED_BY(plugins_mu) = new std::set<std::string>();
}  // namespace

std::vector<std::string> LoadedPlugins() {
  absl::MutexLock lock(&plugins_mu);
  return std::vector<std::string>(loaded_plugins->begin(), loaded_plugins->end());
}

absl::Status LoadPlugin(const std::string& path) {
  absl::MutexLock lock(&plugins_mu);
  std::set<std::string>* loaded = loaded_plugins;
  if (loaded->contains(path)) return absl::OkStatus();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load plugin '", path, "': ", error != nullptr ? error : "unknown error"));
  }
  loaded->insert(path);  // never unloaded: its functions stay registered
  return absl::OkStatus();
}

}  // namespace sluice
