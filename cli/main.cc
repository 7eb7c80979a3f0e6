// sluice: run, inspect and list the pieces of Sluice pipelines from YAML.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/commands.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  CLI::App app{"sluice: the Sluice input-data service command line"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sluice 0.1.0");

  sluice::cli::RunOptions options;
  auto add_pipeline_flags = [&](CLI::App* command) {
    command->add_option("pipeline", options.pipeline_path, "Pipeline YAML file")->required();
    command->add_option("--plugin", options.plugins, "Element-function plugin library to load (repeatable)");
  };
  CLI::App* run = app.add_subcommand("run", "Run a pipeline locally and print its elements as JSON lines");
  add_pipeline_flags(run);
  run->add_option("--limit", options.limit, "Print at most this many elements (-1: all)");
  sluice::cli::ReadOptions read_options;
  CLI::App* read =
      app.add_subcommand("read", "Read a pipeline's elements from the data service as JSON lines");
  read->add_option("pipeline", read_options.run.pipeline_path, "Pipeline YAML file")->required();
  read->add_option("--service", read_options.service, "Dispatcher, grpc://HOST:PORT (overrides the YAML)");
  read->add_option("--job-name", read_options.job_name, "Share the job of this name (overrides the YAML)");
  read->add_option("--processing-mode", read_options.processing_mode,
                   "parallel_epochs or distributed_epoch (overrides the YAML)");
  read->add_option("--limit", read_options.run.limit, "Print at most this many elements (-1: all)");
  read->add_option("--plugin", read_options.run.plugins,
                   "Element-function plugin library to load (repeatable)");
  CLI::App* inspect = app.add_subcommand("inspect", "Show a pipeline's fingerprint, element spec and steps");
  add_pipeline_flags(inspect);
  CLI::App* functions = app.add_subcommand("functions", "List the element functions for map and filter");
  functions->add_option("--plugin", options.plugins, "Plugin library to load first (repeatable)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints usage, or --help
    return code == 0 ? 0 : 2;
  }
  if (run->parsed()) return sluice::cli::RunPipeline(options, std::cout, std::cerr);
  if (read->parsed()) return sluice::cli::ReadPipeline(read_options, std::cout, std::cerr);
  if (inspect->parsed()) return sluice::cli::InspectPipeline(options, std::cout, std::cerr);
  return sluice::cli::ListFunctions(options.plugins, std::cout, std::cerr);
}
