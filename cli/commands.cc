#include "cli/commands.h"

#include <atomic>
#include <csignal>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "cli/input_reader.h"
#include "cli/line_writer.h"
#include "common/atomic_file.h"
#include "google/protobuf/text_format.h"
#include "pipeline/builder.h"
#include "pipeline/function.h"
#include "pipeline/io/source_objects.h"
#include "pipeline/pipeline_restore.h"
#include "pipeline/split_provider.h"
#include "pipeline/yaml_loader.h"
#include "sluice/iterator.h"

namespace sluice::cli {
namespace {

struct Loaded {
  LoadedPipeline pipeline;
  DatasetPtr dataset;
};

// The index of the pipeline's distribute step, or -1.
int DistributeIndex(const proto::DatasetDef& def) {
  for (int i = 0; i < def.steps_size(); ++i) {
    if (def.steps(i).has_distribute()) return i;
  }
  return -1;
}

// "FILE:LINE: " for step `index`, when known.
std::string StepWhere(const LoadedPipeline& pipeline, int index) {
  return index < static_cast<int>(pipeline.step_locations.size()) ? pipeline.step_locations[index] + ": "
                                                                  : "";
}

absl::StatusOr<Loaded> Load(const RunOptions& options) {
  if (absl::Status status = LoadPlugins(options.plugins); !status.ok()) return status;
  absl::StatusOr<LoadedPipeline> pipeline = LoadPipelineFile(options.pipeline_path, {.validate = false});
  if (!pipeline.ok()) return pipeline.status();
  if (const int index = DistributeIndex(pipeline->def); index >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        StepWhere(*pipeline, index), "step ", index + 1,
        " (distribute) reads from the data service, which `sluice run` does not: it runs pipelines in "
        "this process. Use `sluice read ",
        options.pipeline_path, "`, or `sluice inspect` to see both halves"));
  }
  BuildOptions build;
  build.step_locations = &pipeline->step_locations;
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(pipeline->def, build);
  if (!dataset.ok()) return dataset.status();
  return Loaded{*std::move(pipeline), *std::move(dataset)};
}

// SIGINT or SIGTERM while `sluice run --save-state` prints: the loop ends
// cleanly after the element in hand and saves.
std::atomic<int> g_stop_signal{0};
void NoteStopSignal(int signal) { g_stop_signal.store(signal); }

// Where and how often PrintSteps saves the reader's state (RunOptions).
struct StateSaving {
  std::string path;
  int64_t every = 0;
};

// The lines printed so far go out first, so that the state never runs
// ahead of what the reader of the output has.
absl::Status SaveState(InputReader& reader, LineWriter& writer, const StateSaving& saving) {
  writer.Flush();
  absl::StatusOr<std::string> state = reader.SaveState();
  if (!state.ok()) return state.status();
  return WriteFileAtomically(saving.path, *state);
}

// Prints up to `limit` steps (all for -1) as JSON lines, each on its way
// out within 100 ms (cli/line_writer.h), saving the reader's state as
// `saving` asks.
int PrintSteps(InputReader& reader, int64_t limit, bool summary, std::ostream& out, std::ostream& err,
               const StateSaving& saving = {}) {
  if (const int code = reader.StartOrFail(err); code != 0) return code;
  // A pipeline that cannot save says so before it prints anything.
  if (!saving.path.empty()) {
    if (absl::StatusOr<std::string> probe = reader.SaveState(); !probe.ok()) {
      return Fail(probe.status(), err, absl::IsUnimplemented(probe.status()));
    }
  }
  LineWriter writer(out);
  for (int64_t count = 0; (limit < 0 || count < limit) && g_stop_signal.load() == 0 && !writer.ReaderGone();
       ++count) {
    absl::StatusOr<bool> more = reader.Next();
    if (more.ok() && !*more) break;
    absl::StatusOr<std::string> line =
        !more.ok() ? more.status() : (summary ? reader.CurrentSummary() : reader.CurrentJson());
    if (!line.ok()) return Fail(line.status(), err, false);
    writer.Write(*line);
    if (saving.every > 0 && (count + 1) % saving.every == 0) {
      if (absl::Status status = SaveState(reader, writer, saving); !status.ok())
        return Fail(status, err, false);
    }
  }
  // A reader of the output that left (`| head`) ends the read quietly;
  // what it took is unknown, so no state is saved past the last one.
  if (writer.ReaderGone()) return 0;
  if (!saving.path.empty()) {
    if (absl::Status status = SaveState(reader, writer, saving); !status.ok())
      return Fail(status, err, false);
  }
  const int signal = g_stop_signal.load();
  return signal == 0 ? 0 : 128 + signal;
}

// The steps [begin, end) of `def`, one line each, numbered from 1.
void PrintStepList(const proto::DatasetDef& def, int begin, int end, std::ostream& out) {
  for (int i = begin; i < end; ++i) {
    const proto::Step& step = def.steps(i);
    const std::string op = StepOpName(step);
    const auto* field = proto::Step::descriptor()->FindFieldByName(op);
    std::string args;
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    printer.PrintToString(step.GetReflection()->GetMessage(step, field), &args);
    out << "  " << i + 1 << ". " << op << (args.empty() ? "" : " { " + args + "}") << "\n";
  }
}

// What `inspect` says of a dataset built here: spec, cardinality, splits.
void PrintDatasetFacts(const proto::DatasetDef& def, const DatasetBase& dataset, const std::string& indent,
                       std::ostream& out) {
  out << indent << "element_spec: " << dataset.element_spec().DebugString() << "\n";
  out << indent << "cardinality:  " << CardinalityString(dataset.Cardinality()) << "\n";
  absl::StatusOr<std::unique_ptr<SplitProvider>> splits = MakeSplitProvider(def);
  out << indent
      << "splittable:   " << (splits.ok() ? "yes" : absl::StrCat("no (", splits.status().message(), ")"))
      << "\n";
  absl::StatusOr<io::SourceObjects> objects = io::CountSourceObjects(def);
  if (!objects.ok()) {
    out << indent << "objects:      not known (" << objects.status().message() << ")\n";
  } else if (objects->urls > 0) {
    out << indent << "objects:      " << objects->objects << " (" << objects->bytes << " bytes) from "
        << objects->urls << (objects->urls == 1 ? " URL" : " URLs") << "\n";
  }
}

// `inspect` of a pipeline with a distribute step: the workers' half, which
// is built here when it can be (its files may exist only on the workers),
// the step itself, and the reader's half.
int InspectDistributed(const RunOptions& options, const LoadedPipeline& pipeline, int index,
                       std::ostream& out) {
  const proto::DatasetDef& def = pipeline.def;
  const proto::DatasetDef worker_part = WorkerPart(def);
  out << "pipeline:     " << options.pipeline_path << "\n";
  out << "fingerprint:  " << DatasetFingerprint(def) << "\n";
  out << "on the workers (steps 1-" << index << "; the dataset the dispatcher registers):\n";
  out << "  fingerprint:  " << DatasetFingerprint(worker_part) << "\n";
  BuildOptions build;
  build.step_locations = &pipeline.step_locations;
  absl::StatusOr<DatasetPtr> built = BuildDataset(worker_part, build);
  if (built.ok()) {
    PrintDatasetFacts(worker_part, **built, "  ", out);
  } else {
    out << "  element_spec: not known here (" << built.status().message() << ")\n";
  }
  PrintStepList(def, 0, index, out);
  out << "distribute (step " << index + 1 << "):\n";
  PrintStepList(def, index, index + 1, out);
  if (index + 1 == def.steps_size()) {
    out << "in the reading process: no steps\n";
  } else {
    out << "in the reading process (steps " << index + 2 << "-" << def.steps_size() << "):\n";
    PrintStepList(def, index + 1, def.steps_size(), out);
  }
  return 0;
}

absl::Status CheckSaveFlags(const RunOptions& options) {
  if (options.save_every < 0 || (options.save_every > 0 && options.save_state.empty())) {
    return absl::InvalidArgumentError("--save-every needs --save-state FILE and a count >= 1");
  }
  return absl::OkStatus();
}

// Prints the reader's steps as RunOptions ask: from --restore's state,
// saving to --save-state every --save-every steps and at a clean end.
int PrintWithStates(InputReader& reader, const RunOptions& options, const RestoreOptions& restore_as,
                    std::ostream& out, std::ostream& err) {
  if (!options.restore.empty()) {
    std::ifstream in(options.restore, std::ios::binary);
    if (!in) {
      return Fail(absl::NotFoundError(absl::StrCat("--restore: cannot read '", options.restore, "'")), err,
                  true);
    }
    std::string state((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (absl::Status status = reader.SetRestoreState(std::move(state), restore_as); !status.ok()) {
      return Fail(status, err, true);
    }
  }
  // With a state to save, SIGINT and SIGTERM end the run cleanly (after the
  // element in hand), so that the state is saved as of the last line.
  struct sigaction previous_int {
  }, previous_term{};
  if (!options.save_state.empty()) {
    struct sigaction action {};
    action.sa_handler = NoteStopSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_int);
    sigaction(SIGTERM, &action, &previous_term);
  }
  const int code = PrintSteps(reader, options.limit, options.summary, out, err,
                              StateSaving{.path = options.save_state, .every = options.save_every});
  if (!options.save_state.empty()) {
    sigaction(SIGINT, &previous_int, nullptr);
    sigaction(SIGTERM, &previous_term, nullptr);
  }
  return code;
}

}  // namespace

int RunPipeline(const RunOptions& options, std::ostream& out, std::ostream& err) {
  if (absl::Status status = CheckSaveFlags(options); !status.ok()) return Fail(status, err, true);
  absl::StatusOr<Loaded> loaded = Load(options);
  if (!loaded.ok()) return Fail(loaded.status(), err, true);
  std::unique_ptr<InputReader> reader =
      InputReader::ForDataset(loaded->dataset, CheckpointFingerprint(loaded->pipeline.def));
  return PrintWithStates(*reader, options, RestoreOptions{}, out, err);
}

int ReadPipeline(const ReadOptions& options, std::ostream& out, std::ostream& err) {
  if (absl::Status status = CheckSaveFlags(options.run); !status.ok()) return Fail(status, err, true);
  // With --restore, the consumer index and count say which of how many
  // consumers resume a job checkpoint, not a coordinated read.
  RestoreOptions restore_as;
  if (!options.run.restore.empty()) {
    restore_as.num_consumers = options.num_consumers >= 0 ? options.num_consumers : 1;
    restore_as.consumer_index = options.consumer_index >= 0 ? options.consumer_index : 0;
  }
  absl::StatusOr<std::unique_ptr<InputReader>> reader = InputReader::Open(options, /*service_required=*/true);
  if (!reader.ok()) return Fail(reader.status(), err, !IsUnreachable(reader.status()));
  return PrintWithStates(**reader, options.run, restore_as, out, err);
}

int MergeCheckpoints(const MergeOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<NamedState> states;
  for (const std::string& path : options.states) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return Fail(absl::NotFoundError(absl::StrCat("checkpoint merge: cannot read '", path, "'")), err, true);
    states.push_back(
        {path, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())});
  }
  absl::StatusOr<std::string> merged = MergeSavedStates(states);
  if (!merged.ok()) return Fail(merged.status(), err, true);
  if (absl::Status status = WriteFileAtomically(options.output, *merged); !status.ok())
    return Fail(status, err, false);
  out << "merged " << states.size() << " states into " << options.output << "\n";
  return 0;
}

int InspectPipeline(const RunOptions& options, std::ostream& out, std::ostream& err) {
  if (absl::Status status = LoadPlugins(options.plugins); !status.ok()) return Fail(status, err, true);
  absl::StatusOr<LoadedPipeline> pipeline = LoadPipelineFile(options.pipeline_path, {.validate = false});
  if (!pipeline.ok()) return Fail(pipeline.status(), err, true);
  if (const int index = DistributeIndex(pipeline->def); index >= 0) {
    return InspectDistributed(options, *pipeline, index, out);
  }
  absl::StatusOr<Loaded> loaded = Load(options);
  if (!loaded.ok()) return Fail(loaded.status(), err, true);
  const proto::DatasetDef& def = loaded->pipeline.def;
  out << "pipeline:     " << options.pipeline_path << "\n";
  out << "fingerprint:  " << DatasetFingerprint(def) << "\n";
  PrintDatasetFacts(def, *loaded->dataset, "", out);
  out << "steps:\n";
  PrintStepList(def, 0, def.steps_size(), out);
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
