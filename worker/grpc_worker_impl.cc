#include "worker/grpc_worker_impl.h"

#include <chrono>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "service/element_wire.h"
#include "service/grpc_util.h"
#include "service/message_bytes.h"
#include "service/rpc_metrics.h"

namespace sluice::worker {
namespace {

// Finishes the call with `bytes` as its response, or with their error.
void Finish(grpc::ServerUnaryReactor* reactor, absl::StatusOr<grpc::ByteBuffer> bytes,
            grpc::ByteBuffer* response) {
  if (bytes.ok()) *response = *std::move(bytes);
  reactor->Finish(ToGrpcStatus(bytes.status()));
}

// A reply as the bytes of a GetElementsResponse, or its error.
absl::StatusOr<grpc::ByteBuffer> EncodeReply(const WorkerImpl::ElementsReply& reply,
                                             const FrameRequest& frame) {
  if (!reply.status.ok()) return reply.status;
  if (reply.shared_memory_needed > 0) {
    proto::GetElementsResponse needed;
    needed.set_shared_memory_needed(reply.shared_memory_needed);
    return SerializeToByteBuffer(needed);
  }
  absl::StatusOr<grpc::ByteBuffer> bytes = EncodeElementsResponse(
      reply.elements, reply.end_of_sequence, reply.first_index, reply.compression, reply.tags, frame);
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

// An RPC whose logic answers at once: parses the request as `rpc`, calls
// `call(request, &answer)` and finishes with the answer or the error.
template <typename Request, typename Response, typename Call>
grpc::ServerUnaryReactor* AnswerAtOnce(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response, const char* rpc,
                                       const RpcAuthenticator& auth, RpcRole role, Call call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const auto start = std::chrono::steady_clock::now();
  Request parsed;
  Response answer;
  absl::Status status = auth.Check(*context, rpc, role);
  if (status.ok()) status = ParseRequest(*request, rpc, &parsed);
  if (status.ok()) status = call(parsed, &answer);
  RecordRpc(rpc, status, start);
  if (status.ok()) {
    Finish(reactor, SerializeToByteBuffer(answer), response);
  } else {
    Finish(reactor, status, response);
  }
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* GrpcWorkerImpl::GetElements(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const auto start = std::chrono::steady_clock::now();
  proto::GetElementsRequest parsed;
  absl::Status status = auth_->Check(*context, "GetElements", RpcRole::kClient);
  if (status.ok()) status = ParseRequest(*request, "GetElements", &parsed);
  if (!status.ok()) {
    RecordRpc("GetElements", status, start);
    Finish(reactor, status, response);
    return reactor;
  }
  // Held until the response is written, so that the session's memory
  // stays mapped even if its reader hangs up meanwhile.
  absl::StatusOr<std::shared_ptr<SharedRegion>> region = RequestRegion(shared_memory_, parsed);
  if (!region.ok()) {
    RecordRpc("GetElements", region.status(), start);
    Finish(reactor, region.status(), response);
    return reactor;
  }
  if (*region != nullptr) shared_memory_->ReleaseGivenBack(parsed);
  // Answered now or later, on whichever thread has the elements.
  impl_->GetElements(parsed, [this, reactor, response, start, parsed,
                              region = *std::move(region)](WorkerImpl::ElementsReply reply) {
    const FrameRequest frame{.frame = parsed.frame(), .reader_spec = parsed.frame_spec()};
    // A reader on this host that takes lent tensors maps the task's large
    // ones where they are, instead of having them copied into its region.
    std::vector<proto::LentTensor> lent;
    std::vector<Element> unlent;
    int64_t lent_bytes = 0;
    if (region != nullptr && parsed.shm_lending() && reply.heap != nullptr && reply.status.ok() &&
        reply.shared_memory_needed == 0) {
      unlent = reply.elements;
      lent_bytes = shared_memory_->Lend(parsed.shm_session(), *reply.heap, &reply.elements, &lent);
    }
    absl::StatusOr<grpc::ByteBuffer> bytes = EncodeReply(reply, frame);
    absl::StatusOr<std::optional<grpc::ByteBuffer>> placed = std::nullopt;
    if (bytes.ok() && reply.shared_memory_needed == 0)
      placed = PlaceInSharedMemory(region, parsed, *bytes, lent);
    if (!lent.empty() && !(bytes.ok() && placed.ok() && placed->has_value())) {
      // The lent tensors do not reach the reader this way: their leases end,
      // and the response carries their bytes (or the error).
      std::vector<uint64_t> leases;
      for (const proto::LentTensor& t : lent) leases.push_back(t.lease());
      shared_memory_->Release(parsed.shm_session(), leases);
      lent_bytes = 0;
      if (bytes.ok() && placed.ok()) {
        reply.elements = std::move(unlent);
        bytes = EncodeReply(reply, frame);
      }
    }
    if (bytes.ok() && reply.shared_memory_needed == 0) {
      impl_->CountSent(static_cast<int64_t>(reply.elements.size()),
                       static_cast<int64_t>(bytes->Length()) + lent_bytes);
    }
    if (!placed.ok()) {
      bytes = placed.status();
    } else if (placed->has_value()) {
      bytes = **std::move(placed);
    }
    RecordRpc("GetElements", bytes.status(), start);
    Finish(reactor, std::move(bytes), response);
  });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::ProcessTask(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return AnswerAtOnce<proto::ProcessTaskRequest, proto::ProcessTaskResponse>(
      context, request, response, "ProcessTask", *auth_, RpcRole::kCluster,
      [this](const auto& parsed, proto::ProcessTaskResponse*) { return impl_->ProcessTask(parsed); });
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::GetStatus(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  // The cluster's only: it lists every tenant's tasks on this worker.
  return AnswerAtOnce<proto::WorkerStatusRequest, proto::WorkerStatusResponse>(
      context, request, response, "GetStatus", *auth_, RpcRole::kCluster,
      [this](const auto& parsed, auto* answer) { return impl_->GetStatus(parsed, answer); });
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::OpenSharedMemory(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return AnswerAtOnce<proto::OpenSharedMemoryRequest, proto::OpenSharedMemoryResponse>(
      context, request, response, "OpenSharedMemory", *auth_, RpcRole::kClient,
      [this](const auto& parsed, auto* answer) -> absl::Status {
        if (shared_memory_ == nullptr) {
          // Only a reader on this host hears why.
          if (parsed.host_id().empty() || parsed.host_id() != HostId()) {
            return absl::FailedPreconditionError("the reader is on another host than this worker");
          }
          answer->set_unavailable(std::string(shared_memory_error_.message()));
          return absl::OkStatus();
        }
        absl::StatusOr<proto::OpenSharedMemoryResponse> offer = shared_memory_->Offer(parsed.host_id());
        if (!offer.ok()) return offer.status();
        *answer = *std::move(offer);
        return absl::OkStatus();
      });
}

}  // namespace sluice::worker
