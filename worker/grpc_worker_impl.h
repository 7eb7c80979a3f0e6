// The gRPC face of WorkerImpl: one line per RPC.
#ifndef SLUICE_WORKER_GRPC_WORKER_IMPL_H_
#define SLUICE_WORKER_GRPC_WORKER_IMPL_H_

#include "common/grpc_util.h"
#include "sluice/service.grpc.pb.h"
#include "worker/worker_impl.h"

namespace sluice::worker {

class GrpcWorkerImpl final : public proto::WorkerService::Service {
 public:
  explicit GrpcWorkerImpl(WorkerImpl* impl) : impl_(impl) {}
  grpc::Status GetElements(grpc::ServerContext*, const proto::GetElementsRequest* request,
                           proto::GetElementsResponse* response) override {
    return ToGrpcStatus(impl_->GetElements(*request, response));
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
