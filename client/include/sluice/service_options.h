// How a pipeline reads from the Sluice data service: which dispatcher, in
// which processing mode, as which job, and how the readers of a job share
// its elements (tf.data's service.distribute options).
//
//   sluice::ServiceOptions options;
//   options.service = "grpc://127.0.0.1:5000";
//   options.processing_mode = sluice::ProcessingMode::kDistributedEpoch;
//   options.job_name = "train";
//   sluice::Dataset remote = sluice::Dataset::Range(1000).ReadFromService(options);
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_SERVICE_OPTIONS_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_SERVICE_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace sluice {

enum class ProcessingMode {
  // Every worker runs the whole pipeline: each element once per worker.
  kParallelEpochs,
  // The dispatcher hands out splits of the source: each element once in all
  // (at least once; exactly once with `exactly_once`).
  kDistributedEpoch,
};

// tf.data's ShardingPolicy. kOff is parallel_epochs and kDynamic
// distributed_epoch; the static ones (kFile, kData, kFileOrData, kHint)
// shard over the dispatcher's worker_addresses.
enum class ShardingPolicy { kOff, kDynamic, kFile, kData, kFileOrData, kHint };

struct ServiceOptions {
  // Wire compression of the elements a worker sends.
  enum class Compression { kNone, kSnappy, kZstd };

  // grpc://HOST:PORT of the dispatcher.
  std::string service;
  ProcessingMode processing_mode = ProcessingMode::kParallelEpochs;
  // Readers of the same job name share its elements; "" is a job of its
  // own.
  std::string job_name;
  // Unset: the policy the processing mode implies.
  std::optional<ShardingPolicy> sharding_policy;
  // distributed_epoch over an element-wise worker side: a lost worker's
  // splits are read again without repeats.
  bool exactly_once = false;
  // distributed_epoch: elements come in split order (then position),
  // whatever the workers' number, speed or losses, so that a run with the
  // same seeds gives the same sequence. Implies exactly_once (and its
  // element-wise worker side); the job takes one consumer at a time.
  bool deterministic = false;
  // Coordinated reads: `num_consumers` readers of one named job of an
  // infinite dataset, this one being `consumer_index`; in each round all
  // of them get their element from the same worker. 0: not coordinated.
  int64_t num_consumers = 0;
  int64_t consumer_index = 0;
  Compression compression = Compression::kNone;
  // Elements requested or buffered at once per reader; 0 adapts: 64 to
  // start, then 64 MiB worth of the average element (64 to 8192).
  int64_t max_outstanding_requests = 0;
  // How long to keep trying to reach the dispatcher; 0 means 60 s.
  int64_t timeout_ms = 0;
  // parallel_epochs: accept an epoch cut short by a lost worker (a warning
  // with the count lost) instead of failing the read with DataLoss.
  bool allow_partial = false;
  // TCP connections to each worker (1 to 16; 0 means 1). The reader's
  // requests in flight (four per task) take them in turn: for large
  // elements, where one connection is the limit (bench/README.md).
  int64_t connections_per_worker = 0;
  // How elements travel: "auto" (or empty) uses shared memory with a
  // worker on this host and TCP otherwise; "tcp" always uses TCP.
  std::string transport;

  // tf.data's CrossTrainerCache: several trainers read the whole stream of
  // one named job of an endless dataset (repeat() without a count), each
  // from its own position, and the job's workers compute each element once
  // for all of them, keeping their latest `max_bytes` of elements for the
  // trainers behind. A trainer that falls further behind skips to the
  // oldest element kept (sluice_client_cross_trainer_skipped_total and a
  // warning). Each trainer sees a contiguous stream, not an exact epoch.
  // Needs job_name and parallel_epochs; readers with one trainer_id split
  // that trainer's stream between them.
  struct CrossTrainerCache {
    std::string trainer_id;  // 1 to 128 bytes
    int64_t max_bytes = 0;   // > 0, per worker
  };
  std::optional<CrossTrainerCache> cross_trainer_cache;
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_SERVICE_OPTIONS_H_
