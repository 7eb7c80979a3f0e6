#include "dispatcher/dispatcher_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "service/daemon.h"
#include "service/python_settings.h"

namespace sluice::dispatcher {

void DescribeDispatcherConfig(DispatcherConfig* config, ConfigSchema* schema) {
  schema->AddInt("port", &config->port, 0, 65535, "port to listen on; 0 picks a free one");
  schema->AddString("bind_address", &config->bind_address, "address to listen on");
  schema->AddStringList("plugins", &config->plugins,
                        "element-function plugin libraries to load (the workers load the same ones)");
  schema->AddStringList("data_roots", &config->data_roots,
                        "directories file sources may read under when the dispatcher checks a pipeline");
  AddPythonSettings(schema, &config->python);
  schema->AddInt("worker_timeout_ms", &config->worker_timeout_ms, 100, 86400000,
                 "a worker silent this long is lost and its tasks end");
  schema->AddInt("silent_majority_timeout_ms", &config->silent_majority_timeout_ms, 100, 86400000,
                 "when most workers are silent at once (this dispatcher may be cut off), they are lost only "
                 "after this long, or when their readers cannot reach them");
  schema->AddInt("client_timeout_ms", &config->client_timeout_ms, 100, 86400000,
                 "a client silent this long is released");
  schema->AddInt("job_gc_timeout_ms", &config->job_gc_timeout_ms, 10, 86400000 * 30LL,
                 "an iteration without clients this long is collected, with its tasks on the workers");
  schema->AddInt(
      "job_retention_ms", &config->job_retention_ms, 10, 86400000 * 30LL,
      "a job whose iterations are all over, and a dataset no job uses, are forgotten after this long");
  schema->AddInt("splits_per_request", &config->splits_per_request, 1, 1 << 20,
                 "distributed_epoch splits handed out per worker request");
  schema->AddInt("elements_per_split", &config->elements_per_split, 1, 1 << 30,
                 "elements of range/from_tensor_slices in one split");
  schema->AddStringList("worker_addresses", &config->worker_addresses,
                        "workers (HOST:PORT) that static sharding policies shard over, in shard order");
  schema->AddInt(
      "round_window", &config->round_window, 2, 1 << 30,
      "coordinated reads: rounds fixed ahead of the consumers; a new worker serves from after them");
  schema->AddInt("autoscale_smoothing_ms", &config->autoscale_smoothing_ms, 0, 3600000,
                 "autoscaling: time constant of the smoothing of the trainers' wait and the workers' load");
  schema->AddInt("autoscale_up_window_ms", &config->autoscale_up_window_ms, 0, 3600000,
                 "autoscaling: the recommendation rises once the target has been higher this long");
  schema->AddInt("autoscale_down_window_ms", &config->autoscale_down_window_ms, 0, 86400000,
                 "autoscaling: the recommendation falls once the target has been lower this long");
  schema->AddInt("autoscale_max_workers", &config->autoscale_max_workers, 1, 1000000,
                 "autoscaling: the most workers recommended");
  schema->AddString("work_dir", &config->work_dir,
                    "journal state here and recover it on start; empty: nothing survives a restart");
  schema->AddInt("snapshot_interval", &config->snapshot_interval, 1, 1 << 30,
                 "journal records between snapshots that compact the journal");
  schema->AddInt("snapshot_bytes", &config->snapshot_bytes, 1, int64_t{1} << 40,
                 "journal bytes after which a snapshot compacts the journal, whatever the records");
  schema->AddInt("max_datasets", &config->max_datasets, 1, int64_t{1} << 30,
                 "quota: registered datasets at once");
  schema->AddInt("max_definition_bytes", &config->max_definition_bytes, 1, int64_t{1} << 31,
                 "quota: bytes of all registered definitions together (inline data included)");
  schema->AddInt("max_jobs", &config->max_jobs, 1, int64_t{1} << 30, "quota: jobs at once");
  schema->AddInt("max_iterations", &config->max_iterations, 1, int64_t{1} << 30, "quota: iterations at once");
  schema->AddInt("max_restore_numbers", &config->max_restore_numbers, 1, int64_t{1} << 40,
                 "quota: numbers in restored reads' skip lists held at once");
  const auto share = [](const std::string& what) {
    return absl::StrCat("quota per tenant: ", what, "; 0: the total divided by the number of tenants");
  };
  schema->AddInt("tenant_max_datasets", &config->tenant_max_datasets, 0, int64_t{1} << 30,
                 share("registered datasets at once"));
  schema->AddInt("tenant_max_definition_bytes", &config->tenant_max_definition_bytes, 0, int64_t{1} << 31,
                 share("bytes of its registered definitions together"));
  schema->AddInt("tenant_max_jobs", &config->tenant_max_jobs, 0, int64_t{1} << 30, share("jobs at once"));
  schema->AddInt("tenant_max_iterations", &config->tenant_max_iterations, 0, int64_t{1} << 30,
                 share("iterations at once"));
  schema->AddInt("tenant_max_restore_numbers", &config->tenant_max_restore_numbers, 0, int64_t{1} << 40,
                 share("numbers in its restored reads' skip lists"));
  schema->AddInt("max_cross_trainer_cache_bytes", &config->max_cross_trainer_cache_bytes, 1, int64_t{1} << 40,
                 "the most bytes a cross-trainer job may ask each worker to keep for its trainers");
  schema->AddString("log_level", &config->log_level, "trace, debug, info, warn, error or off", CheckLogLevel);
  schema->AddString("port_file", &config->port_file, "write the bound port to this file");
}

void ApplyTenantShares(int64_t tenants, DispatcherConfig* config) {
  tenants = std::max<int64_t>(1, tenants);
  const auto share = [tenants](int64_t total, int64_t* tenant_max) {
    if (*tenant_max == 0) *tenant_max = std::max<int64_t>(1, total / tenants);
  };
  share(config->max_datasets, &config->tenant_max_datasets);
  share(config->max_definition_bytes, &config->tenant_max_definition_bytes);
  share(config->max_jobs, &config->tenant_max_jobs);
  share(config->max_iterations, &config->tenant_max_iterations);
  share(config->max_restore_numbers, &config->tenant_max_restore_numbers);
}

}  // namespace sluice::dispatcher
