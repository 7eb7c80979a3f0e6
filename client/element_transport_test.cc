#include "client/element_transport.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "service/element_wire.h"
#include "sluice/service.grpc.pb.h"

namespace sluice {
namespace {

// Serves `worker` on a free port of 127.0.0.1.
std::unique_ptr<grpc::Server> Serve(grpc::Service* worker, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(worker);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  return server;
}

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
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&worker, &port);
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

// A worker that answers with the elements the reader's request asks for
// (a frame, with or without its spec, or protos) and notes each request's
// frame fields.
class FrameWorker : public proto::WorkerService::Service {
 public:
  grpc::Status GetElements(grpc::ServerContext*, const proto::GetElementsRequest* request,
                           proto::GetElementsResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back({request->frame(), request->frame_spec()});
    }
    absl::StatusOr<grpc::ByteBuffer> bytes =
        EncodeElementsResponse(Elements(), false, 0, proto::COMPRESSION_NONE, {},
                               FrameRequest{request->frame(), request->frame_spec()});
    if (!bytes.ok() || !ParseFromByteBuffer(*bytes, response))
      return grpc::Status(grpc::INTERNAL, "encoding");
    return grpc::Status::OK;
  }
  static std::vector<Element> Elements() {
    std::vector<Element> elements;
    for (int64_t i = 0; i < 5; ++i) {
      elements.push_back(Element({Tensor::Scalar<int64_t>(i), Tensor::StringScalar(std::string(i, 'x'))},
                                 MakeNames({"id", "text"})));
    }
    return elements;
  }
  std::vector<std::pair<bool, uint64_t>> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<bool, uint64_t>> requests_ ABSL_GUARDED_BY(mu_);
};

// The frame fields of 3 requests through a fresh transport, each answer
// checked.
std::vector<std::pair<bool, uint64_t>> FrameRequests(bool frames, uint64_t* spec_id) {
  FrameWorker worker;
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&worker, &port);
  std::unique_ptr<ElementTransport> transport =
      MakeGrpcElementTransport("127.0.0.1:" + std::to_string(port), 1, frames);
  for (int i = 0; i < 3; ++i) {
    proto::GetElementsRequest request;
    request.set_task_id(1);
    request.set_max_elements(5);
    ElementsResponse response;
    REQUIRE(transport->GetElements(request, &response).ok());
    CHECK(response.elements == FrameWorker::Elements());
    CHECK(response.frame == frames);
  }
  *spec_id = transport->frame_specs() == nullptr ? 0 : transport->frame_specs()->Latest();
  server->Shutdown();
  return worker.requests();
}

TEST_CASE("A reader asks for frames, and for the spec only until it has it", "[client][frame]") {
  uint64_t spec_id = 0;
  const std::vector<std::pair<bool, uint64_t>> requests = FrameRequests(true, &spec_id);
  REQUIRE(spec_id != 0);
  CHECK(requests == std::vector<std::pair<bool, uint64_t>>{{true, 0}, {true, spec_id}, {true, spec_id}});
  // Without frames (SLUICE_WIRE_FRAMES=0) it asks for protos, which decode
  // the same.
  const std::vector<std::pair<bool, uint64_t>> without = FrameRequests(false, &spec_id);
  CHECK(spec_id == 0);
  CHECK(without == std::vector<std::pair<bool, uint64_t>>{{false, 0}, {false, 0}, {false, 0}});
}

}  // namespace
}  // namespace sluice
