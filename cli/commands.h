// The `sluice` command's subcommands, kept apart from main.cc so that
// tests can call them. Each returns the process exit code: 0 on success,
// 2 for bad input (a pipeline that does not load), 1 for a failure while
// running.
#ifndef SLUICE_CLI_COMMANDS_H_
#define SLUICE_CLI_COMMANDS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace sluice::cli {

struct RunOptions {
  std::string pipeline_path;
  int64_t limit = -1;                // at most this many elements; -1: all
  std::vector<std::string> plugins;  // loaded before the pipeline
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
};

// `sluice read`: runs a pipeline whose `distribute` step reads from the
// service, printing elements as `sluice run` does.
int ReadPipeline(const ReadOptions& options, std::ostream& out, std::ostream& err);

// `sluice inspect`: fingerprint, element spec, cardinality and steps.
int InspectPipeline(const RunOptions& options, std::ostream& out, std::ostream& err);

// `sluice functions`: the element functions in the registry.
int ListFunctions(const std::vector<std::string>& plugins, std::ostream& out, std::ostream& err);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_COMMANDS_H_
