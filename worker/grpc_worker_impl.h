// The gRPC face of WorkerImpl. Every method takes its request as bytes and
// parses it itself (ParseRequest), so that what protobuf cannot parse is
// InvalidArgument saying why rather than INTERNAL with an empty message.
//
// GetElements is a callback method on raw bytes: the request is parked
// without holding a thread while the task has nothing to send, and the
// response is encoded straight from the tensors' buffers
// (service/element_wire.h) instead of through a GetElementsResponse proto.
#ifndef SLUICE_WORKER_GRPC_WORKER_IMPL_H_
#define SLUICE_WORKER_GRPC_WORKER_IMPL_H_

#include "absl/strings/str_cat.h"
#include "service/element_wire.h"
#include "service/grpc_util.h"
#include "sluice/service.grpc.pb.h"
#include "worker/request_checks.h"
#include "worker/worker_impl.h"

namespace sluice::worker {

class GrpcWorkerImpl final
    : public proto::WorkerService::WithRawCallbackMethod_GetStatus<
          proto::WorkerService::WithRawCallbackMethod_ProcessTask<
              proto::WorkerService::WithRawCallbackMethod_GetElements<proto::WorkerService::Service>>> {
 public:
  explicit GrpcWorkerImpl(WorkerImpl* impl) : impl_(impl) {}

  grpc::ServerUnaryReactor* GetElements(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    proto::GetElementsRequest parsed;
    if (absl::Status status = ParseRequest(*request, "GetElements", &parsed); !status.ok()) {
      reactor->Finish(ToGrpcStatus(status));
      return reactor;
    }
    impl_->GetElements(parsed, [reactor, response](WorkerImpl::ElementsReply reply) {
      absl::StatusOr<grpc::ByteBuffer> bytes =
          reply.status.ok() ? EncodeElementsResponse(reply.elements, reply.end_of_sequence, reply.first_index,
                                                     reply.compression, reply.tags)
                            : absl::StatusOr<grpc::ByteBuffer>(reply.status);
      // The last guard: compression can make a response a little larger
      // than its elements, and gRPC would answer past its limit with only
      // "Sent message larger than max".
      if (bytes.ok() && bytes->Length() > static_cast<size_t>(kMaxMessageBytes)) {
        bytes = absl::ResourceExhaustedError(absl::StrCat(
            "a response of ", reply.elements.size(), " elements from index ", reply.first_index, " is ",
            bytes->Length(), " bytes once compressed, more than gRPC's ", kMaxMessageBytes,
            "-byte message limit: make elements smaller before distribute, or read without compression"));
      }
      if (bytes.ok()) *response = *std::move(bytes);
      reactor->Finish(ToGrpcStatus(bytes.status()));
    });
    return reactor;
  }
  grpc::ServerUnaryReactor* ProcessTask(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    proto::ProcessTaskRequest parsed;
    absl::Status status = ParseRequest(*request, "ProcessTask", &parsed);
    if (status.ok()) status = impl_->ProcessTask(parsed);
    if (status.ok()) *response = SerializeToByteBuffer(proto::ProcessTaskResponse());
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    proto::WorkerStatusRequest parsed;
    proto::WorkerStatusResponse answer;
    absl::Status status = ParseRequest(*request, "GetStatus", &parsed);
    if (status.ok()) status = impl_->GetStatus(parsed, &answer);
    if (status.ok()) *response = SerializeToByteBuffer(answer);
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }

 private:
  WorkerImpl* const impl_;
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_GRPC_WORKER_IMPL_H_
