// ServiceOptions as the pipeline's distribute step.
#include "sluice/service_options.h"

#include <cstddef>

#include "client/dataset_internal.h"

namespace sluice::internal {
namespace {

// The names the distribute step takes, indexed by the enums' values (in
// declaration order).
constexpr const char* kModeNames[] = {"parallel_epochs", "distributed_epoch"};
constexpr const char* kPolicyNames[] = {"OFF", "DYNAMIC", "FILE", "DATA", "FILE_OR_DATA", "HINT"};
constexpr const char* kCompressionNames[] = {"", "snappy", "zstd"};

template <size_t N, typename Enum>
const char* NameOf(const char* const (&names)[N], Enum value) {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : "";
}

}  // namespace

proto::DistributeOp DistributeOpFromOptions(const ServiceOptions& options) {
  proto::DistributeOp op;
  op.set_service(options.service);
  op.set_processing_mode(NameOf(kModeNames, options.processing_mode));
  op.set_job_name(options.job_name);
  if (options.sharding_policy.has_value())
    op.set_sharding_policy(NameOf(kPolicyNames, *options.sharding_policy));
  op.set_exactly_once(options.exactly_once);
  op.set_deterministic(options.deterministic);
  op.set_num_consumers(options.num_consumers);
  op.set_consumer_index(options.consumer_index);
  op.set_compression(NameOf(kCompressionNames, options.compression));
  op.set_max_outstanding_requests(options.max_outstanding_requests);
  op.set_connections_per_worker(options.connections_per_worker);
  op.set_transport(options.transport);
  op.set_timeout_ms(options.timeout_ms);
  op.set_allow_partial(options.allow_partial);
  if (options.cross_trainer_cache.has_value()) {
    op.mutable_cross_trainer_cache()->set_trainer_id(options.cross_trainer_cache->trainer_id);
    op.mutable_cross_trainer_cache()->set_max_bytes(options.cross_trainer_cache->max_bytes);
  }
  return op;
}

}  // namespace sluice::internal
