// Checks at the worker's RPC edge. Range checks of what a worker is sent:
// a request that any client (or a fuzzer) can send must not reach a task
// with a value it cannot handle. A field out of range is InvalidArgument
// naming the RPC, the field, its value and what is allowed. And the bound
// on what one GetElements response can carry back.
#ifndef SLUICE_WORKER_REQUEST_CHECKS_H_
#define SLUICE_WORKER_REQUEST_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "service/grpc_util.h"
#include "sluice/proto/service.pb.h"

namespace sluice::worker {

// The most consumers a coordinated task serves (the dispatcher's bound).
inline constexpr int64_t kMaxTaskConsumers = int64_t{1} << 16;
// The most elements one GetElements call may ask for.
inline constexpr int64_t kMaxElementsPerRequest = int64_t{1} << 16;

// task_id, max_elements, compression, consumer_index and round.
absl::Status CheckGetElementsRequest(const proto::GetElementsRequest& request);
// A pushed task's ids, mode, sharding and consumers.
absl::Status CheckTaskDef(const proto::TaskDef& task);

// What one GetElements response may carry: the message limit less room
// for the framing of its elements.
inline constexpr int64_t kMaxResponseBytes = kMaxMessageBytes - (4 << 20);

// ResourceExhausted for an element of `bytes` (encoded) that no response
// can carry; `which` is "element 7".
absl::Status ElementTooLarge(int64_t task_id, absl::string_view which, int64_t bytes);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_REQUEST_CHECKS_H_
