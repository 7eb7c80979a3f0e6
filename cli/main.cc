// sluice: run, read, benchmark and inspect Sluice pipelines from YAML, and
// show a dispatcher's status.
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "service/channel_security.h"
#include "service/daemon.h"
#include "service/metrics.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  sluice::TurnOffMutexDeadlockDetection();
  // `sluice read ... | head`: a write to a pipe whose reader left fails with
  // EPIPE, and the read ends cleanly, releasing its job at the dispatcher,
  // rather than the process dying mid-read (cli/line_writer.h).
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"sluice: the Sluice input-data service command line"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sluice 0.1.0");

  // Where the client's token and TLS come from: these flags, else the
  // SLUICE_TOKEN_FILE and SLUICE_TLS_* variables.
  sluice::ChannelSecurityFiles security = sluice::ChannelSecurityFilesFromEnvironment();
  app.add_option("--token-file", security.token_file,
                 "File with the client token (default: $SLUICE_TOKEN_FILE)");
  app.add_option("--tls-ca-file", security.tls_ca_file,
                 "CA certificates to verify the daemons with (turns TLS on)");
  app.add_option("--tls-cert-file", security.tls_cert_file, "Client certificate, for mutual TLS");
  app.add_option("--tls-key-file", security.tls_key_file, "The client certificate's private key");
  app.add_option("--tls-server-name", security.tls_server_name,
                 "Name to verify the daemons' certificates against instead of their address");
  app.fallthrough();

  sluice::cli::RunOptions options;
  auto add_pipeline_flags = [&](CLI::App* command) {
    command->add_option("pipeline", options.pipeline_path, "Pipeline YAML file")->required();
    command->add_option("--plugin", options.plugins, "Element-function plugin library to load (repeatable)");
  };
  // The flags of `read` and `bench`.
  auto add_read_flags = [](CLI::App* command, sluice::cli::ReadOptions& read) {
    command->add_option("pipeline", read.run.pipeline_path, "Pipeline YAML file")->required();
    command->add_option("--service", read.service, "Dispatcher, grpc://HOST:PORT (overrides the YAML)");
    command->add_option("--job-name", read.job_name, "Share the job of this name (overrides the YAML)");
    command->add_option("--processing-mode", read.processing_mode,
                        "parallel_epochs or distributed_epoch (overrides the YAML)");
    command->add_option("--sharding-policy", read.sharding_policy,
                        "OFF, DYNAMIC, FILE, DATA, FILE_OR_DATA or HINT (overrides the YAML)");
    command
        ->add_option("--num-consumers", read.num_consumers,
                     "Coordinated reads: how many consumers read the job together (overrides the YAML); with "
                     "--restore, how many consumers resume the job checkpoint")
        ->check(CLI::NonNegativeNumber);
    command
        ->add_option("--consumer-index", read.consumer_index,
                     "Coordinated reads: this consumer's index, from 0 (overrides the YAML); with --restore, "
                     "which of the consumers resuming the job checkpoint this is")
        ->check(CLI::NonNegativeNumber);
    command
        ->add_option(
            "--replicas", read.replicas,
            "Read through DistributeDataset onto these devices, e.g. CPU:0,CPU:1 (one value per replica)")
        ->delimiter(',');
    command
        ->add_option("--global-batch-size", read.global_batch_size,
                     "With --replicas: the global batch size, when the pipeline does not end in a batch step")
        ->check(CLI::NonNegativeNumber);
    command->add_option("--plugin", read.run.plugins, "Element-function plugin library to load (repeatable)");
    command->add_flag(
        "--allow-partial", read.allow_partial,
        "parallel_epochs: accept a partial epoch when a worker is lost (a warning, exit code 0)");
    command
        ->add_option(
            "--timeout-ms", read.timeout_ms,
            "Fail when the dispatcher has not answered for this long (default 60000; overrides the YAML)")
        ->check(CLI::PositiveNumber);
  };
  CLI::App* run = app.add_subcommand("run", "Run a pipeline locally and print its elements as JSON lines");
  add_pipeline_flags(run);
  run->add_option("--limit", options.limit, "Print at most this many elements (-1: all)");
  run->add_flag("--summary", options.summary,
                "One short line per element: big components as dtype[shape] and their mean");
  auto add_state_flags = [](CLI::App* command, sluice::cli::RunOptions& run_options) {
    command->add_option(
        "--save-state", run_options.save_state,
        "Write the iterator's state to this file (atomically) at a clean end (end of data, --limit, "
        "SIGINT, SIGTERM) as of the last element printed");
    command
        ->add_option("--save-every", run_options.save_every,
                     "With --save-state: also save right after every N-th element printed and flushed")
        ->check(CLI::PositiveNumber);
    command->add_option(
        "--restore", run_options.restore,
        "Resume from a state file written by --save-state for the same pipeline, or from a job "
        "checkpoint (sluice checkpoint merge)");
  };
  add_state_flags(run, options);
  sluice::cli::ReadOptions read_options;
  CLI::App* read =
      app.add_subcommand("read", "Read a pipeline's elements from the data service as JSON lines");
  add_read_flags(read, read_options);
  read->add_option("--limit", read_options.run.limit, "Print at most this many elements (-1: all)");
  read->add_flag("--summary", read_options.run.summary,
                 "One short line per element: big components as dtype[shape] and their mean");
  add_state_flags(read, read_options.run);
  std::string metrics_file;
  read->add_option(
      "--metrics-file", metrics_file,
      "Write the client's Prometheus metrics (bytes received, shared-memory responses, ...) here "
      "at the end");
  CLI::App* checkpoint = app.add_subcommand("checkpoint", "Work with saved read states");
  checkpoint->require_subcommand(1);
  sluice::cli::MergeOptions merge_options;
  CLI::App* merge = checkpoint->add_subcommand(
      "merge", "Merge the states that the consumers of one job saved at one step into a job checkpoint");
  merge->add_option("states", merge_options.states, "State files written by sluice read --save-state")
      ->required();
  merge->add_option("-o,--output", merge_options.output, "The job checkpoint to write (atomically)")
      ->required();
  sluice::cli::BenchOptions bench_options;
  CLI::App* bench = app.add_subcommand(
      "bench", "Read a pipeline as fast as possible and report elements/s, MB/s and time spent waiting");
  add_read_flags(bench, bench_options.read);
  bench->add_option("--seconds", bench_options.seconds, "Stop after this many seconds (default 10)");
  bench->add_option("--metrics-file", metrics_file,
                    "Write the client's Prometheus metrics (wait time, bytes received, ...) here at the end");
  sluice::cli::StatusOptions status_options;
  CLI::App* status = app.add_subcommand("status", "Show a dispatcher's workers, datasets, jobs and tasks");
  status->add_option("--service", status_options.service, "Dispatcher, grpc://HOST:PORT")->required();
  status->add_flag("--json", status_options.json, "Print one JSON object instead of tables");
  status->add_option("--timeout-ms", status_options.timeout_ms,
                     "Give up when the dispatcher has not answered within this time (default 5000)");
  sluice::cli::DrainOptions drain_options;
  CLI::App* drain = app.add_subcommand(
      "drain", "Drain a worker: no new work for it, and it leaves once its readers have read what it holds");
  drain->add_option("worker", drain_options.worker, "The worker's HOST:PORT, as sluice status lists it")
      ->required();
  drain->add_option("--dispatcher,--service", drain_options.service, "Dispatcher, grpc://HOST:PORT")
      ->required();
  drain->add_flag("--wait", drain_options.wait, "Wait until the worker has left");
  drain->add_option("--timeout-ms", drain_options.timeout_ms,
                    "Give up after this long, --wait included (default 5000)");
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
  absl::StatusOr<sluice::ChannelSecurity> loaded = sluice::LoadChannelSecurity(security);
  if (!loaded.ok()) {
    std::cerr << "sluice: " << loaded.status().message() << "\n";
    return 2;
  }
  sluice::SetDefaultChannelSecurity(*std::move(loaded));
  if (run->parsed()) return sluice::cli::RunPipeline(options, std::cout, std::cerr);
  // The metrics at the end, whatever the command's outcome: a failed read's
  // counts say how far it went.
  auto write_metrics = [&metrics_file](const char* command, int code) {
    if (metrics_file.empty()) return code;
    std::ofstream out(metrics_file);
    out << sluice::ProcessMetrics().Render();
    if (!out) {
      std::cerr << "sluice " << command << ": cannot write --metrics-file '" << metrics_file << "'\n";
      return code == 0 ? 1 : code;
    }
    return code;
  };
  if (read->parsed())
    return write_metrics("read", sluice::cli::ReadPipeline(read_options, std::cout, std::cerr));
  if (bench->parsed()) {
    bench_options.live_progress = isatty(STDOUT_FILENO) == 1;
    return write_metrics("bench", sluice::cli::RunBench(bench_options, std::cout, std::cerr));
  }
  if (status->parsed()) return sluice::cli::ShowStatus(status_options, std::cout, std::cerr);
  if (drain->parsed()) return sluice::cli::DrainWorker(drain_options, std::cout, std::cerr);
  if (merge->parsed()) return sluice::cli::MergeCheckpoints(merge_options, std::cout, std::cerr);
  if (inspect->parsed()) return sluice::cli::InspectPipeline(options, std::cout, std::cerr);
  return sluice::cli::ListFunctions(options.plugins, std::cout, std::cerr);
}
