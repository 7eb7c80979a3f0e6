#include "worker/element_responses.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/element_wire.h"
#include "service/grpc_util.h"
#include "service/message_bytes.h"
#include "worker/shared_memory_server.h"

namespace sluice::worker {
namespace {

// A reply as the bytes of a GetElementsResponse, or its error.
absl::StatusOr<grpc::ByteBuffer> Encode(const WorkerImpl::ElementsReply& reply, const FrameRequest& frame) {
  if (!reply.status.ok()) return reply.status;
  if (reply.shared_memory_needed > 0) {
    proto::GetElementsResponse needed;
    needed.set_shared_memory_needed(reply.shared_memory_needed);
    return SerializeToByteBuffer(needed);
  }
  if (reply.task_not_here) {
    proto::GetElementsResponse not_here;
    not_here.set_task_not_here(true);
    return SerializeToByteBuffer(not_here);
  }
  absl::StatusOr<grpc::ByteBuffer> bytes =
      EncodeElementsResponse(reply.elements, reply.end_of_sequence, reply.first_index, reply.compression,
                             reply.tags, frame, reply.trainer_skipped);
  // The last guard: compression can make a response a little larger than
  // its elements, and gRPC would answer past its limit with only "Sent
  // message larger than max".
  if (bytes.ok() && bytes->Length() > static_cast<size_t>(kMaxMessageBytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a response of ", reply.elements.size(), " elements from index ", reply.first_index, " is ",
        bytes->Length(), " bytes once compressed, more than gRPC's ", kMaxMessageBytes,
        "-byte message limit: make elements smaller before distribute, or read without compression"));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<grpc::ByteBuffer> EncodeElementsReply(SharedMemoryServer* shared_memory,
                                                     const std::shared_ptr<SharedRegion>& region,
                                                     const proto::GetElementsRequest& request,
                                                     WorkerImpl::ElementsReply reply, SentCounts* sent) {
  const FrameRequest frame{.frame = request.frame(), .reader_spec = request.frame_spec()};
  const bool with_elements = reply.status.ok() && reply.shared_memory_needed == 0 && !reply.task_not_here;
  // A reader on this host that takes lent tensors maps the task's large
  // ones where they are, instead of having them copied into its region.
  std::vector<proto::LentTensor> lent;
  std::vector<Element> unlent;
  int64_t lent_bytes = 0;
  if (region != nullptr && request.shm_lending() && reply.heap != nullptr && with_elements) {
    unlent = reply.elements;
    lent_bytes = shared_memory->Lend(request.shm_session(), *reply.heap, &reply.elements, &lent);
  }
  absl::StatusOr<grpc::ByteBuffer> bytes = Encode(reply, frame);
  absl::StatusOr<std::optional<grpc::ByteBuffer>> placed = std::nullopt;
  if (bytes.ok() && with_elements) placed = PlaceInSharedMemory(region, request, *bytes, lent);
  if (!lent.empty() && !(bytes.ok() && placed.ok() && placed->has_value())) {
    // The lent tensors do not reach the reader this way: their leases end,
    // and the response carries their bytes (or the error). A response with
    // lent tensors is small, so this second encoding is rare: only when even
    // that does not fit the reader's region.
    std::vector<uint64_t> leases;
    for (const proto::LentTensor& t : lent) leases.push_back(t.lease());
    shared_memory->Release(request.shm_session(), leases);
    lent_bytes = 0;
    if (bytes.ok() && placed.ok()) {
      reply.elements = std::move(unlent);
      bytes = Encode(reply, frame);
    }
  }
  if (bytes.ok() && with_elements) {
    sent->elements = static_cast<int64_t>(reply.elements.size());
    sent->bytes = static_cast<int64_t>(bytes->Length()) + lent_bytes;
  }
  if (!placed.ok()) return placed.status();
  if (placed->has_value()) return **std::move(placed);
  return bytes;
}

}  // namespace sluice::worker
