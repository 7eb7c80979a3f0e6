// The gRPC face of WorkerImpl: one line per RPC, except GetElements.
//
// GetElements is a callback method on raw bytes: the request is parked
// without holding a thread while the task has nothing to send, and the
// response is encoded straight from the tensors' buffers
// (common/element_wire.h) instead of through a GetElementsResponse proto.
#ifndef SLUICE_WORKER_GRPC_WORKER_IMPL_H_
#define SLUICE_WORKER_GRPC_WORKER_IMPL_H_

#include "common/element_wire.h"
#include "common/grpc_util.h"
#include "sluice/service.grpc.pb.h"
#include "worker/worker_impl.h"

namespace sluice::worker {

class GrpcWorkerImpl final
    : public proto::WorkerService::WithRawCallbackMethod_GetElements<proto::WorkerService::Service> {
 public:
  explicit GrpcWorkerImpl(WorkerImpl* impl) : impl_(impl) {}

  grpc::ServerUnaryReactor* GetElements(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    proto::GetElementsRequest parsed;
    if (!ParseFromByteBuffer(*request, &parsed)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "GetElements request does not parse"));
      return reactor;
    }
    impl_->GetElements(parsed, [reactor, response](WorkerImpl::ElementsReply reply) {
      absl::StatusOr<grpc::ByteBuffer> bytes =
          reply.status.ok() ? EncodeElementsResponse(reply.elements, reply.end_of_sequence, reply.first_index,
                                                     reply.compression, reply.tags)
                            : absl::StatusOr<grpc::ByteBuffer>(reply.status);
      if (bytes.ok()) *response = *std::move(bytes);
      reactor->Finish(ToGrpcStatus(bytes.status()));
    });
    return reactor;
  }
  grpc::Status ProcessTask(grpc::ServerContext*, const proto::ProcessTaskRequest* request,
                           proto::ProcessTaskResponse*) override {
    return ToGrpcStatus(impl_->ProcessTask(*request));
  }
  grpc::Status GetStatus(grpc::ServerContext*, const proto::WorkerStatusRequest* request,
                         proto::WorkerStatusResponse* response) override {
    return ToGrpcStatus(impl_->GetStatus(*request, response));
  }

 private:
  WorkerImpl* const impl_;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_GRPC_WORKER_IMPL_H_
