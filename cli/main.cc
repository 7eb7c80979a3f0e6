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
  CLI::App* inspect = app.add_subcommand("inspect", "Show a pipeline's fingerprint, element spec and steps");
  add_pipeline_flags(inspect);
  CLI::App* functions = app.add_subcommand("functions", "List the element functions for map and filter");
  functions->add_option("--plugin", options.plugins, "Plugin library to load first (repeatable)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // prints usage; exit code 2 for bad usage
  }
  if (run->parsed()) return sluice::cli::RunPipeline(options, std::cout, std::cerr);
  if (inspect->parsed()) return sluice::cli::InspectPipeline(options, std::cout, std::cerr);
  return sluice::cli::ListFunctions(options.plugins, std::cout, std::cerr);
}
