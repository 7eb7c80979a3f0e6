#include "worker/grpc_worker_impl.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "service/element_wire.h"
#include "service/grpc_util.h"

namespace sluice::worker {
namespace {

// Finishes the call with `bytes` as its response, or with their error.
void Finish(grpc::ServerUnaryReactor* reactor, absl::StatusOr<grpc::ByteBuffer> bytes,
            grpc::ByteBuffer* response) {
  if (bytes.ok()) *response = *std::move(bytes);
  reactor->Finish(ToGrpcStatus(bytes.status()));
}

// A reply as the bytes of a GetElementsResponse, or its error.
absl::StatusOr<grpc::ByteBuffer> EncodeReply(const WorkerImpl::ElementsReply& reply) {
  if (!reply.status.ok()) return reply.status;
  absl::StatusOr<grpc::ByteBuffer> bytes = EncodeElementsResponse(
      reply.elements, reply.end_of_sequence, reply.first_index, reply.compression, reply.tags);
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
                                       grpc::ByteBuffer* response, const char* rpc, Call call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Request parsed;
  Response answer;
  absl::Status status = ParseRequest(*request, rpc, &parsed);
  if (status.ok()) status = call(parsed, &answer);
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
  proto::GetElementsRequest parsed;
  if (absl::Status status = ParseRequest(*request, "GetElements", &parsed); !status.ok()) {
    Finish(reactor, status, response);
    return reactor;
  }
  // Answered now or later, on whichever thread has the elements.
  impl_->GetElements(parsed, [reactor, response](WorkerImpl::ElementsReply reply) {
    Finish(reactor, EncodeReply(reply), response);
  });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::ProcessTask(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return AnswerAtOnce<proto::ProcessTaskRequest, proto::ProcessTaskResponse>(
      context, request, response, "ProcessTask",
      [this](const auto& parsed, proto::ProcessTaskResponse*) { return impl_->ProcessTask(parsed); });
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::GetStatus(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return AnswerAtOnce<proto::WorkerStatusRequest, proto::WorkerStatusResponse>(
      context, request, response, "GetStatus",
      [this](const auto& parsed, auto* answer) { return impl_->GetStatus(parsed, answer); });
}

}  // namespace sluice::worker
