#include "worker/worker_config.h"

namespace sluice::worker {

void DescribeWorkerConfig(WorkerConfig* config, ConfigSchema* schema) {
  schema->AddString("dispatcher", &config->dispatcher, "dispatcher address, HOST:PORT");
  schema->AddInt("port", &config->port, 0, 65535, "port to listen on; 0 picks a free one");
  schema->AddString("bind_address", &config->bind_address, "address to listen on");
  schema->AddString("advertised_address", &config->advertised_address,
                    "HOST:PORT clients use to reach this worker");
  schema->AddInt("heartbeat_interval_ms", &config->heartbeat_interval_ms, 10, 3600000,
                 "time between heartbeats to the dispatcher");
  schema->AddInt("buffer_elements", &config->buffer_elements, 1, 1 << 20,
                 "elements buffered per task ahead of clients");
  schema->AddInt("buffer_bytes", &config->buffer_bytes, 1024, int64_t{1} << 40,
                 "bytes buffered per task ahead of clients");
  schema->AddStringList("tags", &config->tags, "labels shown in status");
  schema->AddStringList("plugins", &config->plugins, "element-function plugin libraries to load");
  schema->AddInt("dispatcher_timeout_ms", &config->dispatcher_timeout_ms, 100, 86400000,
                 "how long to retry reaching the dispatcher at startup");
  schema->AddString("log_level", &config->log_level, "trace, debug, info, warn, error or off");
  schema->AddString("port_file", &config->port_file, "write the bound port to this file");
}

}  // namespace sluice::worker
