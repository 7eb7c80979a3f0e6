// workerd: parses flags and config, then serves until SIGINT, or drains
// after SIGTERM or `sluice drain` and then leaves.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "pipeline/sandbox.h"
#include "service/daemon.h"
#include "service/grpc_util.h"
#include "service/metrics.h"
#include "service/python_settings.h"
#include "worker/grpc_worker_impl.h"
#include "worker/shared_memory_server.h"
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
  sluice::DaemonSettings common;
  if (int code =
          sluice::SetUpDaemon(argc, argv, "workerd", "the Sluice worker", schema, config.log_level, &common);
      code >= 0) {
    return code;
  }
  absl::StatusOr<sluice::ServerSecurity> security =
      sluice::SecureDaemon("workerd", config.bind_address, common.security, "worker", config.plugins,
                           config.data_roots, config.cache_dir);
  if (!security.ok()) {
    std::cerr << "workerd: " << security.status().message() << "\n";
    return sluice::kConfigErrorExitCode;
  }
  if (absl::Status status =
          sluice::SetUpPythonFunctions(config.python, "worker", true, security->NumTenants());
      !status.ok()) {
    std::cerr << "workerd: " << status.message() << "\n";
    return sluice::kConfigErrorExitCode;
  }
  const sluice::RpcAuthenticator auth(security->cluster_token, security->client_token, security->tenants);
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
  // Readers on this host get elements through shared memory; without it
  // (no Unix sockets, say) they read over TCP.
  absl::StatusOr<std::unique_ptr<sluice::worker::SharedMemoryServer>> shared_memory =
      config.shared_memory
          ? sluice::worker::SharedMemoryServer::Start(
                config.max_memory_bytes > 0 ? config.max_memory_bytes / 4 : int64_t{16} << 30)
          : absl::UnavailableError("this worker's shared_memory setting is false");
  if (!shared_memory.ok() && config.shared_memory) {
    spdlog::warn("shared memory for readers on this host is off: {}",
                 std::string(shared_memory.status().message()));
    config.shared_memory = false;  // nothing to lend, so tasks keep no heaps
  }
  sluice::worker::WorkerImpl impl(config, shared_memory.ok() ? shared_memory->get() : nullptr,
                                  shared_memory.status());
  sluice::worker::GrpcWorkerImpl service(&impl, &auth);
  // Computed at each scrape of /metrics.
  auto status_sample = [&impl](auto field) {
    return [&impl, field] {
      sluice::proto::WorkerStatusResponse status;
      (void)impl.GetStatus({}, &status);
      return sluice::MetricSamples{{{}, static_cast<double>(field(status))}};
    };
  };
  const sluice::MetricCallbackHandle tasks_gauge = sluice::ProcessMetrics().AddGaugeCallback(
      "sluice_worker_tasks", "tasks this worker runs", {},
      status_sample([](const sluice::proto::WorkerStatusResponse& s) { return s.tasks_size(); }));
  const sluice::MetricCallbackHandle elements_gauge = sluice::ProcessMetrics().AddGaugeCallback(
      "sluice_worker_buffered_elements", "elements produced and waiting for clients", {},
      status_sample([](const sluice::proto::WorkerStatusResponse& s) { return s.buffered_elements(); }));
  const sluice::MetricCallbackHandle bytes_gauge = sluice::ProcessMetrics().AddGaugeCallback(
      "sluice_worker_buffered_bytes", "bytes of elements produced and waiting for clients", {},
      status_sample([](const sluice::proto::WorkerStatusResponse& s) { return s.buffered_bytes(); }));
  return sluice::ServeUntilShutdown(
      "workerd",
      {.bind_address = config.bind_address,
       .port = static_cast<int>(config.port),
       .port_file = config.port_file,
       .security = *security,
       .http = common.http,
       .rpc_service = sluice::proto::WorkerService::service_full_name(),
       .rpc_roles = sluice::worker::WorkerRpcRole},
      {&service},
      [&](int port) {
        const std::string address = AdvertisedAddress(config, port);
        sluice::SetPipelineSandboxOwner("worker " + address);
        return impl.Start(address);
      },
      [&] { impl.Stop(); },
      // SIGTERM (Kubernetes scaling down) drains: the worker's readers
      // lose nothing (docs/operations.md, "Scaling down").
      {.begin = [&] { impl.Drain("SIGTERM"); }, .done = [&] { return impl.Drained(); }});
}
