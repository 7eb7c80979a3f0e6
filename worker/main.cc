// workerd: parses flags and config, then serves until SIGTERM/SIGINT.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "service/daemon.h"
#include "service/grpc_util.h"
#include "worker/grpc_worker_impl.h"
#include "worker/worker_impl.h"

namespace {

// HOST:PORT that clients use: the configured one, else the bind address
// (or this host's name when binding every interface) with the bound port.
std::string AdvertisedAddress(const sluice::worker::WorkerConfig& config, int port) {
  if (!config.advertised_address.empty()) return config.advertised_address;
  std::string host = config.bind_address;
  if (host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

int main(int argc, char** argv) {
  sluice::worker::WorkerConfig config;
  sluice::ConfigSchema schema("worker");
  sluice::worker::DescribeWorkerConfig(&config, &schema);
  if (int code = sluice::SetUpDaemon(argc, argv, "workerd", "the Sluice worker", schema, config.log_level);
      code >= 0) {
    return code;
  }
  if (config.dispatcher.empty()) {
    std::cerr << "workerd: --dispatcher HOST:PORT is required (or 'dispatcher' in the config file)\n";
    return sluice::kConfigErrorExitCode;
  }
  if (absl::Status status = sluice::ParseServiceAddress(config.dispatcher).status(); !status.ok()) {
    std::cerr << "workerd: --dispatcher: " << status.message() << "\n";
    return sluice::kConfigErrorExitCode;
  }
  if (absl::Status status = sluice::worker::ApplyMemoryLimit(config.max_memory_bytes); !status.ok()) {
    std::cerr << "workerd: " << status.message() << "\n";
    return sluice::kConfigErrorExitCode;
  }
  for (const std::string& plugin : config.plugins) {
    if (absl::Status status = sluice::LoadPlugin(plugin); !status.ok()) {
      std::cerr << "workerd: " << status.message() << "\n";
      return sluice::kConfigErrorExitCode;
    }
  }
  sluice::worker::WorkerImpl impl(config);
  sluice::worker::GrpcWorkerImpl service(&impl);
  return sluice::ServeUntilShutdown(
      "workerd", {config.bind_address, static_cast<int>(config.port), config.port_file}, {&service},
      [&](int port) { return impl.Start(AdvertisedAddress(config, port)); }, [&] { impl.Stop(); });
}
