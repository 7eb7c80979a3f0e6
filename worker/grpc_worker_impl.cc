#include "worker/grpc_worker_impl.h"

#include <chrono>
#include <utility>

#include "absl/status/statusor.h"
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

// An RPC whose logic answers at once: parses the request as `rpc`, calls
// `call(request, &answer)` and finishes with the answer or the error.
template <typename Request, typename Response, typename Call>
grpc::ServerUnaryReactor* AnswerAtOnce(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response, const char* rpc,
                                       const RpcAuthenticator& auth, Call call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const auto start = std::chrono::steady_clock::now();
  Request parsed;
  Response answer;
  Caller caller;
  absl::Status status = auth.Check(*context, rpc, *WorkerRpcRole(rpc), &caller);
  if (status.ok()) status = ParseRequest(*request, rpc, &parsed);
  if (status.ok()) status = call(parsed, &answer, caller);
  RecordRpc(rpc, status, start);
  if (status.ok()) {
    Finish(reactor, SerializeToByteBuffer(answer), response);
  } else {
    Finish(reactor, status, response);
  }
  return reactor;
}

}  // namespace

std::optional<RpcRole> WorkerRpcRole(absl::string_view method) {
  if (method == "GetElements" || method == "OpenSharedMemory") return RpcRole::kClient;
  if (method == "ProcessTask" || method == "GetStatus") return RpcRole::kCluster;
  return std::nullopt;
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::GetElements(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const auto start = std::chrono::steady_clock::now();
  proto::GetElementsRequest parsed;
  absl::Status status = auth_->Check(*context, "GetElements", *WorkerRpcRole("GetElements"));
  if (status.ok()) status = ParseRequest(*request, "GetElements", &parsed);
  if (!status.ok()) {
    RecordRpc("GetElements", status, start);
    Finish(reactor, status, response);
    return reactor;
  }
  // Answered now or later, on whichever thread has the elements.
  impl_->ServeElements(parsed, [reactor, response, start](absl::StatusOr<grpc::ByteBuffer> bytes) {
    RecordRpc("GetElements", bytes.status(), start);
    Finish(reactor, std::move(bytes), response);
  });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::ProcessTask(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return AnswerAtOnce<proto::ProcessTaskRequest, proto::ProcessTaskResponse>(
      context, request, response, "ProcessTask", *auth_,
      [this](const auto& parsed, proto::ProcessTaskResponse*, const Caller&) {
        return impl_->ProcessTask(parsed);
      });
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::GetStatus(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  // The cluster's only: it lists every tenant's tasks on this worker.
  return AnswerAtOnce<proto::WorkerStatusRequest, proto::WorkerStatusResponse>(
      context, request, response, "GetStatus", *auth_,
      [this](const auto& parsed, auto* answer, const Caller&) { return impl_->GetStatus(parsed, answer); });
}

grpc::ServerUnaryReactor* GrpcWorkerImpl::OpenSharedMemory(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return AnswerAtOnce<proto::OpenSharedMemoryRequest, proto::OpenSharedMemoryResponse>(
      context, request, response, "OpenSharedMemory", *auth_,
      [this](const auto& parsed, auto* answer, const Caller& caller) {
        return impl_->OpenSharedMemory(parsed, answer, caller.Owner());
      });
}

}  // namespace sluice::worker
