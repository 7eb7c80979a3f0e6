// dispatcherd's settings, from YAML (--config) and flags. Every key is
// documented in docs/configuration.md.
#ifndef SLUICE_DISPATCHER_DISPATCHER_CONFIG_H_
#define SLUICE_DISPATCHER_DISPATCHER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "config/config_schema.h"
#include "pipeline/python_pool.h"

namespace sluice::dispatcher {

struct DispatcherConfig {
  int64_t port = 5000;
  std::string bind_address = "127.0.0.1";
  // A worker without a heartbeat for this long is lost; its tasks end.
  int64_t worker_timeout_ms = 10000;
  // When more than half of the workers are silent past worker_timeout_ms at
  // once, this dispatcher suspects itself (dispatcher/silent_workers.h):
  // they are removed only after this long, or when their readers report
  // them unreachable.
  int64_t silent_majority_timeout_ms = 60000;
  // A client without a heartbeat for this long is released.
  int64_t client_timeout_ms = 60000;
  // An iteration without clients for this long is collected: its workers
  // drop its tasks and buffers. An iteration with a live client never is.
  int64_t job_gc_timeout_ms = 300000;
  // A job whose iterations are all over (finished or collected, without
  // clients), and a dataset that no job uses, are removed from the state
  // after this long; a named job read after that starts anew.
  int64_t job_retention_ms = 300000;
  // Splits handed to a worker per GetSplits call, at most.
  int64_t splits_per_request = 16384;
  // Elements of range/from_tensor_slices per split.
  int64_t elements_per_split = 64;
  // The static list of workers (HOST:PORT as they advertise themselves)
  // that the FILE, DATA, FILE_OR_DATA and HINT sharding policies shard
  // over: worker i runs shard i of N.
  std::vector<std::string> worker_addresses;
  // Coordinated reads: rounds for which a consumer's task list is fixed
  // ahead of the furthest round reported; a worker that joins serves from
  // the round after.
  int64_t round_window = 4096;
  // Autoscaling (docs/design.md, "Autoscaling"): the time constant of the
  // smoothing of the trainers' wait and the workers' load; how long the
  // target must stay above the recommendation before it rises, and below
  // it before it falls; the most workers it recommends.
  int64_t autoscale_smoothing_ms = 10000;
  int64_t autoscale_up_window_ms = 6000;
  int64_t autoscale_down_window_ms = 60000;
  int64_t autoscale_max_workers = 1000;
  // Where the journal and snapshots live; empty: state is not kept across
  // restarts.
  std::string work_dir;
  // A snapshot replaces the journal after this many records, or after
  // this many bytes of them (an endless distributed_epoch read journals
  // its split leases, hundreds of KB a second, in few records).
  int64_t snapshot_interval = 100000;
  int64_t snapshot_bytes = int64_t{64} << 20;
  // Quotas on what clients may make the dispatcher hold, so that no client
  // can grow its memory and snapshot without bound (each definition may
  // carry up to 64 MiB of inline data): registered datasets and the bytes
  // of their definitions, jobs and iterations. Past one, a request is
  // ResourceExhausted naming it; finished jobs are collected after
  // job_retention_ms, which frees their share.
  int64_t max_datasets = 10000;
  int64_t max_definition_bytes = int64_t{256} << 20;
  int64_t max_jobs = 10000;
  int64_t max_iterations = 100000;
  // Numbers of restored reads' skip lists (skip_splits, skip_positions)
  // held in the state: each is a few ranges for an honest restore, and up
  // to 2^21 numbers for a forged one.
  int64_t max_restore_numbers = int64_t{1} << 23;
  // The same for each tenant (auth.clients; the single client token is
  // the tenant ""). 0, the default: a fair share, the total divided by the
  // number of tenants (ApplyTenantShares), so that no tenant can take the
  // rest; an operator may set any share.
  int64_t tenant_max_datasets = 0;
  int64_t tenant_max_definition_bytes = 0;
  int64_t tenant_max_jobs = 0;
  int64_t tenant_max_iterations = 0;
  int64_t tenant_max_restore_numbers = 0;
  // The most bytes a cross-trainer job may ask each worker to keep for its
  // trainers (DistributeOp.cross_trainer_cache.max_bytes), per task.
  int64_t max_cross_trainer_cache_bytes = int64_t{1} << 30;
  // Plugins loaded at start, so that pipelines naming them can be
  // checked here (the workers load the same ones); a request never loads
  // one.
  std::vector<std::string> plugins;
  // Where file sources may read when the dispatcher builds a pipeline to
  // check it (list_files globs, image_folder lists); empty: anywhere.
  std::vector<std::string> data_roots;
  PythonSettings python;  // python.*: the py: functions pipelines may call
  std::string log_level = "info";
  // When set, the bound port is written here (for scripts using port 0).
  std::string port_file;
  // Not a setting: dispatcherd's main sets it to the cluster token. The
  // key of restore proofs (GetOrCreateIterationResponse.restore_key),
  // alike on every dispatcher of the cluster, so that a saved read
  // restores on a restarted or another one; empty (no auth): none asked.
  std::string restore_key_secret;
};

// Registers every setting of `config` with `schema`.
void DescribeDispatcherConfig(DispatcherConfig* config, ConfigSchema* schema);

// Sets each tenant_max_* left 0 to its total divided by `tenants` (at
// least 1 each); `tenants` is at least 1.
void ApplyTenantShares(int64_t tenants, DispatcherConfig* config);

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_DISPATCHER_CONFIG_H_
