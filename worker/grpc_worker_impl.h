// The gRPC face of WorkerImpl: a thin adapter, one line per RPC where the
// logic answers at once. Every method takes its request as bytes and
// parses it itself (ParseRequest), so that what protobuf cannot parse is
// InvalidArgument saying why rather than INTERNAL with an empty message;
// statuses cross to gRPC only through ToGrpcStatus (service/grpc_util.h).
//
// GetElements is a callback method on raw bytes: the request is parked
// without holding a thread while the task has nothing to send, and
// WorkerImpl::ServeElements hands back the response's bytes, encoded
// straight from the tensors' buffers (worker/element_responses.h) instead
// of through a GetElementsResponse proto.
#ifndef SLUICE_WORKER_GRPC_WORKER_IMPL_H_
#define SLUICE_WORKER_GRPC_WORKER_IMPL_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.grpc.pb.h"
#include "worker/worker_impl.h"

namespace sluice::worker {

// WorkerService with every method a raw callback method.
using RawWorkerService = proto::WorkerService::WithRawCallbackMethod_OpenSharedMemory<
    proto::WorkerService::WithRawCallbackMethod_GetStatus<
        proto::WorkerService::WithRawCallbackMethod_ProcessTask<
            proto::WorkerService::WithRawCallbackMethod_GetElements<proto::WorkerService::Service>>>>;

// The token each WorkerService method takes: a reader's GetElements and
// OpenSharedMemory the client token (or the cluster token); ProcessTask
// and GetStatus, which list and start every tenant's tasks, only the
// cluster token. nullopt: not a WorkerService method.
std::optional<RpcRole> WorkerRpcRole(absl::string_view method);

class GrpcWorkerImpl final : public RawWorkerService {
 public:
  // `auth` checks every call's token, as WorkerRpcRole says.
  GrpcWorkerImpl(WorkerImpl* impl, const RpcAuthenticator* auth) : impl_(impl), auth_(auth) {}

  grpc::ServerUnaryReactor* GetElements(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ProcessTask(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* OpenSharedMemory(grpc::CallbackServerContext* context,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) override;

 private:
  WorkerImpl* const impl_;
  const RpcAuthenticator* const auth_;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_GRPC_WORKER_IMPL_H_
