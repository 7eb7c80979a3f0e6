#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "client/data_service_dataset.h"
#include "common/json.h"
#include "google/protobuf/text_format.h"
#include "pipeline/builder.h"
#include "pipeline/function.h"
#include "pipeline/split_provider.h"
#include "pipeline/yaml_loader.h"

namespace sluice::cli {
namespace {

// Exit code 2 for input the user must fix, 1 for failures while running.
int Fail(const absl::Status& status, std::ostream& err, bool loading) {
  err << "sluice: " << status.message() << "\n";
  return loading ? 2 : 1;
}

absl::Status LoadPlugins(const std::vector<std::string>& plugins) {
  for (const std::string& plugin : plugins) {
    if (absl::Status status = LoadPlugin(plugin); !status.ok()) return status;
  }
  return absl::OkStatus();
}

struct Loaded {
  LoadedPipeline pipeline;
  DatasetPtr dataset;
};

absl::StatusOr<Loaded> Load(const RunOptions& options) {
  if (absl::Status status = LoadPlugins(options.plugins); !status.ok()) return status;
  absl::StatusOr<LoadedPipeline> pipeline = LoadPipelineFile(options.pipeline_path);
  if (!pipeline.ok()) return pipeline.status();
  BuildOptions build;
  build.step_locations = &pipeline->step_locations;
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(pipeline->def, build);
  if (!dataset.ok()) return dataset.status();
  return Loaded{*std::move(pipeline), *std::move(dataset)};
}

// Prints up to `limit` elements (all for -1) as JSON lines.
int PrintElements(const DatasetBase& dataset, int64_t limit, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = dataset.MakeIterator(IteratorContext{});
  if (!iterator.ok()) return Fail(iterator.status(), err, false);
  std::string line;
  for (int64_t count = 0; limit < 0 || count < limit; ++count) {
    Element element;
    bool end = false;
    if (absl::Status status = (*iterator)->GetNext(&element, &end); !status.ok()) {
      out.flush();
      return Fail(status, err, false);
    }
    if (end) break;
    line = ElementToJson(element);
    line.push_back('\n');
    out.write(line.data(), static_cast<std::streamsize>(line.size()));
  }
  out.flush();
  return 0;
}

}  // namespace

int RunPipeline(const RunOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Loaded> loaded = Load(options);
  if (!loaded.ok()) return Fail(loaded.status(), err, true);
  return PrintElements(*loaded->dataset, options.limit, out, err);
}

int ReadPipeline(const ReadOptions& options, std::ostream& out, std::ostream& err) {
  EnableDataService();
  if (absl::Status status = LoadPlugins(options.run.plugins); !status.ok()) return Fail(status, err, true);
  // Not validated on load: the steps before `distribute` may read files
  // that only the workers have.
  absl::StatusOr<LoadedPipeline> pipeline = LoadPipelineFile(options.run.pipeline_path, {.validate = false});
  if (!pipeline.ok()) return Fail(pipeline.status(), err, true);
  proto::DistributeOp* distribute = nullptr;
  for (proto::Step& step : *pipeline->def.mutable_steps()) {
    if (step.has_distribute()) distribute = step.mutable_distribute();
  }
  if (distribute == nullptr) {
    if (options.service.empty()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(options.run.pipeline_path,
                                                          ": the pipeline has no distribute step; add one or "
                                                          "pass --service grpc://HOST:PORT")),
                  err, true);
    }
    distribute = pipeline->def.add_steps()->mutable_distribute();
    pipeline->step_locations.push_back("--service");
  }
  if (!options.service.empty()) distribute->set_service(options.service);
  if (!options.job_name.empty()) distribute->set_job_name(options.job_name);
  if (!options.processing_mode.empty()) distribute->set_processing_mode(options.processing_mode);
  BuildOptions build;
  build.step_locations = &pipeline->step_locations;
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(pipeline->def, build);
  if (!dataset.ok()) {
    // Refusals by the service (a bad definition) are the user's to fix;
    // an unreachable service is a failure to run.
    return Fail(dataset.status(), err, dataset.status().code() != absl::StatusCode::kUnavailable);
  }
  return PrintElements(**dataset, options.run.limit, out, err);
}

int InspectPipeline(const RunOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Loaded> loaded = Load(options);
  if (!loaded.ok()) return Fail(loaded.status(), err, true);
  const proto::DatasetDef& def = loaded->pipeline.def;
  out << "pipeline:     " << options.pipeline_path << "\n";
  out << "fingerprint:  " << DatasetFingerprint(def) << "\n";
  out << "element_spec: " << loaded->dataset->element_spec().DebugString() << "\n";
  out << "cardinality:  " << CardinalityString(loaded->dataset->Cardinality()) << "\n";
  absl::StatusOr<std::unique_ptr<SplitProvider>> splits = MakeSplitProvider(def);
  out << "splittable:   " << (splits.ok() ? "yes" : absl::StrCat("no (", splits.status().message(), ")"))
      << "\n";
  out << "steps:\n";
  for (int i = 0; i < def.steps_size(); ++i) {
    const proto::Step& step = def.steps(i);
    const std::string op = StepOpName(step);
    const auto* field = proto::Step::descriptor()->FindFieldByName(op);
    std::string args;
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    printer.PrintToString(step.GetReflection()->GetMessage(step, field), &args);
    out << "  " << i + 1 << ". " << op << (args.empty() ? "" : " { " + args + "}") << "\n";
  }
  return 0;
}

int ListFunctions(const std::vector<std::string>& plugins, std::ostream& out, std::ostream& err) {
  if (absl::Status status = LoadPlugins(plugins); !status.ok()) return Fail(status, err, true);
  const FunctionRegistry& registry = FunctionRegistry::Global();
  for (const std::string& name : registry.Names()) {
    out << name << "\t" << registry.Description(name) << "\n";
  }
  return 0;
}

}  // namespace sluice::cli
