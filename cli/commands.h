// The `sluice` command's subcommands, kept apart from main.cc so that
// tests can call them. Each returns the process exit code: 0 on success,
// 2 for bad input (a pipeline that does not load, a malformed flag), 1 for
// a failure while running (cli/exit_codes.h).
#ifndef SLUICE_CLI_COMMANDS_H_
#define SLUICE_CLI_COMMANDS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/proto/service.pb.h"

namespace sluice::cli {

struct RunOptions {
  std::string pipeline_path;
  int64_t limit = -1;                // at most this many elements; -1: all
  bool summary = false;              // one short line per element (cli/summary.h)
  std::vector<std::string> plugins;  // loaded before the pipeline
  // Iterator checkpoints (issue 20), `sluice run` and `read`: the state is
  // written atomically to `save_state` after every `save_every`-th element
  // printed (0: never) and again at a clean end (the end of the data,
  // --limit, SIGINT or SIGTERM), as of the last element printed; `restore`
  // resumes from such a file.
  std::string save_state;
  int64_t save_every = 0;
  std::string restore;
};

// `sluice run`: prints each element as one JSON line.
int RunPipeline(const RunOptions& options, std::ostream& out, std::ostream& err);

struct ReadOptions {
  RunOptions run;
  // Override the pipeline's `distribute` step; with no such step, --service
  // adds one at the end.
  std::string service;
  std::string job_name;
  std::string processing_mode;
  std::string sharding_policy;
  // Coordinated reads; -1: as in the YAML.
  int64_t num_consumers = -1;
  int64_t consumer_index = -1;
  // Local devices ("CPU:0", "GPU:1"): read through sluice::DistributeDataset,
  // one step (a value per replica) at a time. Empty: element by element.
  std::vector<std::string> replicas;
  // With replicas: the global batch size, for a pipeline that does not end
  // in a batch step. 0: from the pipeline.
  int64_t global_batch_size = 0;
  // The distribute step's allow_partial (set when true) and timeout_ms
  // (set when > 0).
  bool allow_partial = false;
  int64_t timeout_ms = 0;
};

// `sluice read`: runs a pipeline whose `distribute` step reads from the
// service, printing elements as `sluice run` does, or with replicas each
// step as PerReplica::ToJson.
int ReadPipeline(const ReadOptions& options, std::ostream& out, std::ostream& err);

struct MergeOptions {
  std::vector<std::string> states;  // files written by --save-state
  std::string output;               // the job checkpoint
};

// `sluice checkpoint merge`: the consumers' states of one step into one
// job checkpoint, which `read --restore FILE --consumer-index I
// --num-consumers M` resumes on M consumers.
int MergeCheckpoints(const MergeOptions& options, std::ostream& out, std::ostream& err);

struct StatusOptions {
  std::string service;  // grpc://HOST:PORT
  bool json = false;
  // The whole command's time limit, retries included.
  int64_t timeout_ms = 5000;
};

// `sluice status`: the dispatcher's workers, datasets, jobs, iterations and
// tasks (its GetStatus RPC), as tables or as one JSON object.
int ShowStatus(const StatusOptions& options, std::ostream& out, std::ostream& err);

// What every subcommand that calls the dispatcher checks first (`status`,
// `drain`): its --service as HOST:PORT, and a --timeout-ms above 0.
absl::StatusOr<std::string> DispatcherAddress(const std::string& service, int64_t timeout_ms);

// The tables of `sluice status`; heartbeats are shown as their age at
// `now_unix_ms`.
std::string FormatStatusTables(const proto::StatusSnapshot& snapshot, int64_t now_unix_ms);
// protobuf's JSON mapping of the snapshot, with proto field names and every
// field, zeros included, so that scripts find each key (int64 values are
// strings and enums are names, as that mapping has them).
std::string StatusToJson(const proto::StatusSnapshot& snapshot);

struct BenchOptions {
  ReadOptions read;  // read.run.limit is not used
  double seconds = 10;
  // A progress line rewritten about twice a second; main sets it when
  // stdout is a terminal.
  bool live_progress = false;
};

// What `sluice bench` measured. A batch is one pipeline element (with
// replicas, one step); its elements are the rows of the first dimension of
// its first component (1 for a scalar), summed over replicas.
struct BenchStats {
  double wall_seconds = 0;  // from the first GetNext
  double wait_seconds = 0;  // inside GetNext (with replicas, until the step is on its devices)
  int64_t batches = 0;
  int64_t elements = 0;
  int64_t bytes = 0;  // tensor bytes
  enum class Stop { kTimeLimit, kEndOfInput, kError };
  Stop stopped_by = Stop::kTimeLimit;
  int replicas = 0;                 // 0 without --replicas
  double first_batch_seconds = -1;  // from the first GetNext to the first batch; -1 before one
  // Packed text (pack_sequences' segment_ids): tokens and padding read;
  // tokens stays -1 for other pipelines.
  int64_t tokens = -1;
  int64_t padding = 0;
};

// One line without a newline, for the terminal.
std::string FormatBenchProgress(const BenchStats& stats);
// The lines bench prints at the end. MB are 10^6 bytes.
std::string FormatBenchSummary(const BenchStats& stats);

// `sluice bench`: reads as fast as it can for options.seconds or until the
// input ends, then prints the summary. Without a `distribute` step or
// --service, the pipeline runs in this process.
int RunBench(const BenchOptions& options, std::ostream& out, std::ostream& err);

// `sluice inspect`: fingerprint, element spec, cardinality and steps.
int InspectPipeline(const RunOptions& options, std::ostream& out, std::ostream& err);

// `sluice functions`: the element functions in the registry.
int ListFunctions(const std::vector<std::string>& plugins, std::ostream& out, std::ostream& err);

struct DrainOptions {
  std::string worker;   // HOST:PORT, as `sluice status` lists it
  std::string service;  // the dispatcher, grpc://HOST:PORT
  // Wait until the worker has left (the dispatcher no longer lists it).
  bool wait = false;
  // The whole command's time limit, retries and --wait included.
  int64_t timeout_ms = 5000;
};

// `sluice drain`: asks the dispatcher to drain a worker (its DrainWorker
// RPC, which needs the cluster token): no new tasks or splits for it, and
// it leaves once its readers have what it holds. An address no worker
// registered with exits 2.
int DrainWorker(const DrainOptions& options, std::ostream& out, std::ostream& err);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_COMMANDS_H_
