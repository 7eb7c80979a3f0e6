// workerd's settings, from YAML (--config) and flags. Every key is
// documented in docs/configuration.md.
#ifndef SLUICE_WORKER_WORKER_CONFIG_H_
#define SLUICE_WORKER_WORKER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "config/config_schema.h"

namespace sluice::worker {

struct WorkerConfig {
  std::string dispatcher;  // HOST:PORT or grpc://HOST:PORT
  int64_t port = 0;
  std::string bind_address = "0.0.0.0";
  // The address clients use to reach this worker; default HOST:PORT with
  // HOST the bind address (localhost when binding every interface).
  std::string advertised_address;
  int64_t heartbeat_interval_ms = 500;
  // Per task: elements produced ahead of the clients, by count and bytes.
  int64_t buffer_elements = 64;
  int64_t buffer_bytes = 256 << 20;
  std::vector<std::string> tags;
  std::vector<std::string> plugins;
  // How long to keep retrying the dispatcher at startup.
  int64_t dispatcher_timeout_ms = 60000;
  std::string log_level = "info";
  std::string port_file;
};

void DescribeWorkerConfig(WorkerConfig* config, ConfigSchema* schema);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_WORKER_CONFIG_H_
