// Range checks of what a worker is sent, at the RPC edge: a request that
// any client (or a fuzzer) can send must not reach a task with a value it
// cannot handle. A field out of range is InvalidArgument naming the RPC,
// the field, its value and what is allowed.
#ifndef SLUICE_WORKER_REQUEST_CHECKS_H_
#define SLUICE_WORKER_REQUEST_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "sluice/service.pb.h"

namespace sluice::worker {

// The most consumers a coordinated task serves (the dispatcher's bound).
inline constexpr int64_t kMaxTaskConsumers = int64_t{1} << 16;

// Parses a request that gRPC handed over as bytes, so that one protobuf
// cannot parse is InvalidArgument saying why, not gRPC's INTERNAL with an
// empty message: nested past protobuf's 100-message limit (a definition
// with about 30 zips or interleaves inside each other), or malformed (a
// string that is not UTF-8).
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, absl::string_view rpc,
                          google::protobuf::MessageLite* request);

// task_id, max_elements, compression, consumer_index and round.
absl::Status CheckGetElementsRequest(const proto::GetElementsRequest& request);
// A pushed task's ids, mode, sharding and consumers.
absl::Status CheckTaskDef(const proto::TaskDef& task);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_REQUEST_CHECKS_H_
