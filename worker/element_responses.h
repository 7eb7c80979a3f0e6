// What a GetElements request is sent back: a task's reply
// (WorkerImpl::ElementsReply) encoded as a GetElementsResponse
// (service/element_wire.h), its large tensors lent to a reader on this
// host that takes lent tensors, and the whole placed in the reader's
// shared-memory region when it asked for one and the response fits; sent
// inline otherwise. This is the worker's lending and fallback policy, in
// one place; WorkerImpl::ServeElements calls it and the gRPC adapter only
// forwards the bytes.
#ifndef SLUICE_WORKER_ELEMENT_RESPONSES_H_
#define SLUICE_WORKER_ELEMENT_RESPONSES_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "service/shared_memory.h"
#include "sluice/proto/service.pb.h"
#include "worker/worker_impl.h"

namespace sluice::worker {

class SharedMemoryServer;

// What a response carried to its reader, for the worker's counters.
struct SentCounts {
  int64_t elements = 0;
  // The response's bytes plus the bytes of the tensors lent in it.
  int64_t bytes = 0;
};

// `reply` as the bytes to send for `request`. `region`: the request's
// shared-memory region (RequestRegion), or null when it asked for none;
// `shared_memory` is then unused and may be null. Lent tensors whose
// response does not reach the reader through its region have their leases
// given back, and the response carries their bytes instead. `sent` is set
// for a response with elements or the end (not for an error, nor for a
// shared_memory_needed answer).
absl::StatusOr<grpc::ByteBuffer> EncodeElementsReply(SharedMemoryServer* shared_memory,
                                                     const std::shared_ptr<SharedRegion>& region,
                                                     const proto::GetElementsRequest& request,
                                                     WorkerImpl::ElementsReply reply, SentCounts* sent);

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_ELEMENT_RESPONSES_H_
