#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "cli/input_reader.h"
#include "google/protobuf/text_format.h"
#include "pipeline/builder.h"
#include "pipeline/function.h"
#include "pipeline/split_provider.h"
#include "pipeline/yaml_loader.h"

namespace sluice::cli {
namespace {

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

// Prints up to `limit` steps (all for -1) as JSON lines.
int PrintSteps(InputReader& reader, int64_t limit, std::ostream& out, std::ostream& err) {
  if (absl::Status status = reader.Start(); !status.ok()) return Fail(status, err, false);
  for (int64_t count = 0; limit < 0 || count < limit; ++count) {
    absl::StatusOr<bool> more = reader.Next();
    if (more.ok() && !*more) break;
    absl::StatusOr<std::string> line = more.ok() ? reader.CurrentJson() : more.status();
    if (!line.ok()) {
      out.flush();  // the elements before the error
      return Fail(line.status(), err, false);
    }
    line->push_back('\n');
    out.write(line->data(), static_cast<std::streamsize>(line->size()));
  }
  out.flush();
  return 0;
}

}  // namespace

int RunPipeline(const RunOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Loaded> loaded = Load(options);
  if (!loaded.ok()) return Fail(loaded.status(), err, true);
  return PrintSteps(*InputReader::ForDataset(loaded->dataset), options.limit, out, err);
}

int ReadPipeline(const ReadOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<InputReader>> reader = InputReader::Open(options, /*service_required=*/true);
  if (!reader.ok()) return Fail(reader.status(), err, !IsUnreachable(reader.status()));
  return PrintSteps(**reader, options.run.limit, out, err);
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
