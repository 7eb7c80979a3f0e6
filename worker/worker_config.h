// workerd's settings, from YAML (--config) and flags. Every key is
// documented in docs/configuration.md.
#ifndef SLUICE_WORKER_WORKER_CONFIG_H_
#define SLUICE_WORKER_WORKER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/config_schema.h"
#include "pipeline/python_pool.h"

namespace sluice::worker {

// Three quarters of the machine's physical memory, but at least 4 GiB
// (a worker's virtual size with its threads' stacks and malloc arenas
// is over 1 GiB before any data).
int64_t DefaultMaxMemoryBytes();

struct WorkerConfig {
  std::string dispatcher;  // HOST:PORT or grpc://HOST:PORT
  int64_t port = 0;
  std::string bind_address = "127.0.0.1";
  // The address clients use to reach this worker; default HOST:PORT with
  // HOST the bind address (localhost when binding every interface).
  std::string advertised_address;
  int64_t heartbeat_interval_ms = 500;
  // Per task: elements produced ahead of the clients, by count and bytes.
  int64_t buffer_elements = 0;  // 0: 64, more for small elements (worker_task.h)
  int64_t buffer_bytes = 256 << 20;
  std::vector<std::string> tags;
  // The only plugins loaded: a pipeline may name one, never load one.
  std::vector<std::string> plugins;
  // File sources read only under these directories; empty: anywhere.
  std::vector<std::string> data_roots;
  PythonSettings python;  // python.*: the py: functions pipelines may call
  // The cache op's file caches are written only under this directory (a
  // pipeline's relative filename is relative to it); empty: pipelines
  // cannot write file caches on this worker.
  std::string cache_dir;
  // How long to keep retrying the dispatcher at startup.
  int64_t dispatcher_timeout_ms = 60000;
  std::string log_level = "info";
  std::string port_file;
  // The worker's address space limit (RLIMIT_AS): an allocation past it
  // fails the task that made it with ResourceExhausted, not the process.
  // Default: three quarters of the machine's memory; 0: no limit.
  int64_t max_memory_bytes = DefaultMaxMemoryBytes();
  // Offer readers on this host shared memory (docs/design.md, "Shared memory").
  bool shared_memory = true;
  // Draining (SIGTERM, `sluice drain`): how long the worker waits for its
  // readers to take what its tasks hold before it leaves anyway, losing
  // the rest. Below the pod's terminationGracePeriodSeconds.
  int64_t drain_timeout_ms = 25000;
};

void DescribeWorkerConfig(WorkerConfig* config, ConfigSchema* schema);

// Applies max_memory_bytes to this process; a no-op for 0, and in
// sanitizer builds (which reserve terabytes of address space).
absl::Status ApplyMemoryLimit(int64_t max_memory_bytes);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_WORKER_CONFIG_H_
