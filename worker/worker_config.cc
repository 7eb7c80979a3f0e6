#include "worker/worker_config.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/host_buffer_cache.h"
#include "service/daemon.h"
#include "service/grpc_util.h"
#include "service/python_settings.h"
#include "worker/shared_memory_heap.h"

namespace sluice::worker {
namespace {

absl::Status CheckAdvertisedAddress(const std::string& address) {
  absl::StatusOr<std::string> parsed = ParseServiceAddress(address);
  if (!parsed.ok() || *parsed != address) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t DefaultMaxMemoryBytes() {
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page_size = sysconf(_SC_PAGE_SIZE);
  const int64_t physical = pages > 0 && page_size > 0 ? pages * page_size : 0;
  return std::max<int64_t>(physical / 4 * 3, int64_t{4} << 30);
}

absl::Status ApplyMemoryLimit(int64_t max_memory_bytes) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)max_memory_bytes;
  return absl::OkStatus();
#else
  if (max_memory_bytes == 0) return absl::OkStatus();
  rlimit limit{};
  limit.rlim_cur = static_cast<rlim_t>(max_memory_bytes);
  limit.rlim_max = RLIM_INFINITY;
  rlimit current{};
  if (getrlimit(RLIMIT_AS, &current) == 0) limit.rlim_max = current.rlim_max;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_cur > limit.rlim_max) limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_AS, &limit) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_memory_bytes ", max_memory_bytes,
                                                   ": cannot set the limit: ", std::strerror(errno)));
  }
  // Freed tensor buffers kept for reuse count against the limit too: the
  // process's, and those of the tasks' heaps together.
  const size_t cached =
      std::min<size_t>(HostBufferCache::kMaxCachedBytes, static_cast<size_t>(max_memory_bytes) / 32);
  HostBufferCache::Global().SetMaxCachedBytes(cached);
  SharedBufferHeap::SetProcessCachedBytes(cached);
  return absl::OkStatus();
#endif
}

void DescribeWorkerConfig(WorkerConfig* config, ConfigSchema* schema) {
  schema->AddString("dispatcher", &config->dispatcher, "dispatcher address, HOST:PORT");
  schema->AddInt("port", &config->port, 0, 65535, "port to listen on; 0 picks a free one");
  schema->AddString("bind_address", &config->bind_address, "address to listen on");
  schema->AddString("advertised_address", &config->advertised_address,
                    "HOST:PORT clients use to reach this worker", CheckAdvertisedAddress);
  schema->AddInt("heartbeat_interval_ms", &config->heartbeat_interval_ms, 10, 3600000,
                 "time between heartbeats to the dispatcher");
  schema->AddInt(
      "buffer_elements", &config->buffer_elements, 0, 1 << 20,
      "elements buffered per task ahead of clients; 0: 64, and up to 8192 while they take under 16 MiB");
  schema->AddInt("buffer_bytes", &config->buffer_bytes, 1024, int64_t{1} << 40,
                 "bytes buffered per task ahead of clients");
  schema->AddStringList("tags", &config->tags, "labels shown in status");
  schema->AddStringList("plugins", &config->plugins,
                        "element-function plugin libraries to load (the only ones a pipeline may use)");
  schema->AddStringList("data_roots", &config->data_roots,
                        "directories file sources may read under (after symlinks and ..); unset: any path");
  AddPythonSettings(schema, &config->python);
  schema->AddString("cache_dir", &config->cache_dir,
                    "directory the cache op writes file caches under (relative filenames are relative to "
                    "it); unset: pipelines cannot write file caches");
  schema->AddInt("dispatcher_timeout_ms", &config->dispatcher_timeout_ms, 100, 86400000,
                 "how long to retry reaching the dispatcher at startup");
  schema->AddString("log_level", &config->log_level, "trace, debug, info, warn, error or off", CheckLogLevel);
  schema->AddString("port_file", &config->port_file, "write the bound port to this file");
  schema->AddInt("max_memory_bytes", &config->max_memory_bytes, 0, int64_t{1} << 50,
                 "address space limit; an allocation past it fails its task, not the worker (0: none)");
  schema->AddBool("shared_memory", &config->shared_memory,
                  "readers on this host get elements through shared memory (false: TCP only)");
  schema->AddInt("drain_timeout_ms", &config->drain_timeout_ms, 0, 86400000,
                 "after SIGTERM or `sluice drain`: the longest wait for readers to take what the tasks "
                 "hold before leaving anyway");
}

}  // namespace sluice::worker
