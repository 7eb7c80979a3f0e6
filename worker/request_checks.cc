#include "worker/request_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/element_wire.h"

namespace sluice::worker {
namespace {

absl::Status OutOfRange(absl::string_view rpc, absl::string_view field, int64_t value,
                        absl::string_view allowed) {
  return absl::InvalidArgumentError(absl::StrCat(rpc, ": ", field, " must be ", allowed, ", got ", value));
}

}  // namespace

absl::Status CheckGetElementsRequest(const proto::GetElementsRequest& request) {
  constexpr absl::string_view kRpc = "GetElements";
  if (request.task_id() < 0) return OutOfRange(kRpc, "task_id", request.task_id(), ">= 0");
  if (request.max_elements() < 0 || request.max_elements() > kMaxElementsPerRequest) {
    return OutOfRange(kRpc, "max_elements", request.max_elements(),
                      absl::StrCat("in [0, ", kMaxElementsPerRequest, "] (0 asks for one)"));
  }
  if (!proto::WireCompression_IsValid(request.compression())) {
    return OutOfRange(kRpc, "compression", request.compression(),
                      "COMPRESSION_NONE (0), COMPRESSION_SNAPPY (1) or COMPRESSION_ZSTD (2)");
  }
  if (request.consumer_index() < 0) {
    return OutOfRange(kRpc, "consumer_index", request.consumer_index(), ">= 0");
  }
  if (request.round() < 0) return OutOfRange(kRpc, "round", request.round(), ">= 0");
  return absl::OkStatus();
}

absl::Status CheckTaskDef(const proto::TaskDef& task) {
  constexpr absl::string_view kRpc = "ProcessTask";
  if (task.task_id() <= 0) return OutOfRange(kRpc, "task.task_id", task.task_id(), "> 0");
  if (task.iteration_id() < 0) return OutOfRange(kRpc, "task.iteration_id", task.iteration_id(), ">= 0");
  if (task.processing_mode() != proto::PARALLEL_EPOCHS &&
      task.processing_mode() != proto::DISTRIBUTED_EPOCH) {
    return OutOfRange(kRpc, "task.processing_mode", task.processing_mode(),
                      "PARALLEL_EPOCHS (1) or DISTRIBUTED_EPOCH (2)");
  }
  if (!proto::ShardingPolicy_IsValid(task.sharding_policy())) {
    return OutOfRange(kRpc, "task.sharding_policy", task.sharding_policy(), "a ShardingPolicy (0 to 6)");
  }
  if (task.num_shards() < 0) return OutOfRange(kRpc, "task.num_shards", task.num_shards(), ">= 0");
  if (task.shard_index() < 0 || (task.num_shards() > 0 && task.shard_index() >= task.num_shards())) {
    return OutOfRange(kRpc, "task.shard_index", task.shard_index(),
                      absl::StrCat("in [0, num_shards ", task.num_shards(), ")"));
  }
  // Readers must present it (GetElementsRequest.task_secret); a task
  // without one could be read by no one.
  if (task.read_secret().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kRpc, ": task.read_secret is empty (the dispatcher gives every task one)"));
  }
  if (task.num_consumers() < 0 || task.num_consumers() > kMaxTaskConsumers) {
    return OutOfRange(kRpc, "task.num_consumers", task.num_consumers(),
                      absl::StrCat("in [0, ", kMaxTaskConsumers, "]"));
  }
  return absl::OkStatus();
}

absl::Status ElementTooLarge(int64_t task_id, absl::string_view which, int64_t bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("task ", task_id, ": ", which, " takes up to ", bytes, " bytes, more than the ",
                   kMaxResponseBytes, " bytes a response can carry (gRPC's ", kMaxMessageBytes,
                   "-byte message limit less framing): make elements smaller before distribute (a smaller "
                   "batch_size, or batch after distribute)"));
}

}  // namespace sluice::worker
