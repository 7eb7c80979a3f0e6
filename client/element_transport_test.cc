#include "client/element_transport.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "sluice/service.grpc.pb.h"

namespace sluice {
namespace {

// A worker that answers every GetElements with the end of the task and
// notes which connection (the peer's address and port) each came on.
class PeerRecordingWorker : public proto::WorkerService::Service {
 public:
  grpc::Status GetElements(grpc::ServerContext* context, const proto::GetElementsRequest*,
                           proto::GetElementsResponse* response) override {
    response->set_end_of_sequence(true);
    absl::MutexLock lock(&mu_);
    peers_.insert(context->peer());
    return grpc::Status::OK;
  }
  std::set<std::string> peers() {
    absl::MutexLock lock(&mu_);
    return peers_;
  }

 private:
  absl::Mutex mu_;
  std::set<std::string> peers_ ABSL_GUARDED_BY(mu_);
};

// The distinct connections `calls` requests over `connections` came on.
size_t ConnectionsUsed(int connections, int calls) {
  PeerRecordingWorker worker;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&worker);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  std::unique_ptr<ElementTransport> transport =
      MakeGrpcElementTransport("127.0.0.1:" + std::to_string(port), connections);
  for (int i = 0; i < calls; ++i) {
    proto::GetElementsRequest request;
    request.set_task_id(1);
    request.set_max_elements(1);
    ElementsResponse response;
    REQUIRE(transport->GetElements(request, &response).ok());
    CHECK(response.end_of_sequence);
  }
  server->Shutdown();
  return worker.peers().size();
}

TEST_CASE("Requests to a worker take the transport's connections in turn", "[client]") {
  CHECK(ConnectionsUsed(1, 6) == 1);
  CHECK(ConnectionsUsed(3, 6) == 3);
  CHECK(ConnectionsUsed(3, 2) == 2);
  // Out of range: clamped to 1 to kMaxConnectionsPerWorker.
  CHECK(ConnectionsUsed(0, 4) == 1);
  CHECK(ConnectionsUsed(40, 2 * kMaxConnectionsPerWorker) == kMaxConnectionsPerWorker);
}

}  // namespace
}  // namespace sluice
