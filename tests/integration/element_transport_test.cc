#include "client/read/element_transport.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/read/shared_memory_transport.h"
#include "service/compression.h"
#include "service/element_wire.h"
#include "service/message_bytes.h"
#include "service/shared_memory.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/testing/loopback_server.h"
#include "worker/shared_memory_server.h"

namespace sluice::reader {
namespace {

using testing::ServeOnLoopback;

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
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&worker, &port);
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
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&worker, &port);
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

// A worker that answers every GetElements with `answer` (a lying one:
// the fields are what a fake worker holding the cluster's token may send).
class FixedAnswerWorker : public proto::WorkerService::Service {
 public:
  explicit FixedAnswerWorker(proto::GetElementsResponse answer) : answer_(std::move(answer)) {}
  grpc::Status GetElements(grpc::ServerContext*, const proto::GetElementsRequest*,
                           proto::GetElementsResponse* response) override {
    *response = answer_;
    return grpc::Status::OK;
  }

 private:
  const proto::GetElementsResponse answer_;
};

// One request to `worker` over TCP: the transport's status.
absl::Status AskOnce(grpc::Service* worker, std::string* address) {
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(worker, &port);
  *address = "127.0.0.1:" + std::to_string(port);
  std::unique_ptr<ElementTransport> transport = MakeGrpcElementTransport(*address, 1);
  proto::GetElementsRequest request;
  request.set_task_id(1);
  request.set_max_elements(5);
  ElementsResponse response;
  const absl::Status status = transport->GetElements(request, &response);
  server->Shutdown();
  return status;
}

TEST_CASE("A response of zstd elements that decompress past the message limit is refused, not allocated",
          "[client][compression]") {
  // 64 MiB of zeros compress to a few KiB; five of them declare 320 MiB,
  // past the 256 MiB limit though each alone is under it.
  std::string bomb;
  REQUIRE(Compress(proto::COMPRESSION_ZSTD, std::string(size_t{64} << 20, '\0'), &bomb).ok());
  CHECK(bomb.size() < 16384);
  proto::GetElementsResponse answer;
  answer.set_compression(proto::COMPRESSION_ZSTD);
  for (int i = 0; i < 5; ++i) answer.add_compressed_elements(bomb);
  FixedAnswerWorker worker(answer);
  std::string address;
  const absl::Status status = AskOnce(&worker, &address);
  CHECK(status ==
        absl::DataLossError(absl::StrCat(
            "the response of worker ", address,
            ": GetElements response: its 5 compressed elements declare 335544320 bytes decompressed, "
            "past the 268435456 they may have")));
}

TEST_CASE("shared_memory_needed or shared_memory_bytes answered over TCP is refused naming the worker",
          "[client][shared_memory]") {
  proto::GetElementsResponse needed;
  needed.set_shared_memory_needed(int64_t{40} << 20);
  FixedAnswerWorker needy(needed);
  std::string address;
  absl::Status status = AskOnce(&needy, &address);
  CHECK(status == absl::DataLossError(absl::StrCat("worker ", address,
                                                   " answered shared_memory_needed (41943040 bytes) to a "
                                                   "request that offered no shared memory")));
  proto::GetElementsResponse in_memory;
  in_memory.set_shared_memory_bytes(4096);
  FixedAnswerWorker marker(in_memory);
  status = AskOnce(&marker, &address);
  CHECK(status == absl::DataLossError(absl::StrCat("worker ", address,
                                                   " answered shared_memory_bytes (4096) to a request that "
                                                   "offered no shared memory")));
}

// A worker on this host that offers shared memory (a real
// SharedMemoryServer) but answers every GetElements with
// shared_memory_needed: `needed(capacity)` for a request whose region
// holds `capacity` bytes (0 over TCP). Notes each request's capacity.
class NeedyWorker : public proto::WorkerService::Service {
 public:
  explicit NeedyWorker(std::function<int64_t(int64_t)> needed) : needed_(std::move(needed)) {
    absl::StatusOr<std::unique_ptr<worker::SharedMemoryServer>> server =
        worker::SharedMemoryServer::Start(int64_t{4} << 30);
    REQUIRE(server.ok());
    server_ = *std::move(server);
  }
  grpc::Status OpenSharedMemory(grpc::ServerContext*, const proto::OpenSharedMemoryRequest* request,
                                proto::OpenSharedMemoryResponse* response) override {
    absl::StatusOr<proto::OpenSharedMemoryResponse> offer = server_->Offer(request->host_id());
    if (!offer.ok()) return grpc::Status(grpc::FAILED_PRECONDITION, std::string(offer.status().message()));
    *response = *std::move(offer);
    return grpc::Status::OK;
  }
  grpc::Status GetElements(grpc::ServerContext*, const proto::GetElementsRequest* request,
                           proto::GetElementsResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      capacities_.push_back(request->shm_capacity());
    }
    response->set_shared_memory_needed(needed_(request->shm_capacity()));
    return grpc::Status::OK;
  }
  std::vector<int64_t> capacities() {
    absl::MutexLock lock(&mu_);
    return capacities_;
  }

 private:
  const std::function<int64_t(int64_t)> needed_;
  std::unique_ptr<worker::SharedMemoryServer> server_;
  absl::Mutex mu_;
  std::vector<int64_t> capacities_ ABSL_GUARDED_BY(mu_);
};

// One request through shared memory to `worker`: the transport's status.
absl::Status AskThroughMemory(NeedyWorker& worker, std::string* address) {
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&worker, &port);
  *address = "127.0.0.1:" + std::to_string(port);
  absl::Status status;
  {
    SharedMemoryTransport transport(*address, MakeGrpcElementTransport(*address, 1));
    proto::GetElementsRequest request;
    request.set_task_id(1);
    request.set_max_elements(5);
    ElementsResponse response;
    status = transport.GetElements(request, &response);
  }
  server->Shutdown();
  return status;
}

TEST_CASE("shared_memory_needed for no more than the region holds is refused naming the worker",
          "[client][shared_memory]") {
  REQUIRE(!HostId().empty());
  NeedyWorker worker([](int64_t) { return int64_t{1} << 20; });
  std::string address;
  const absl::Status status = AskThroughMemory(worker, &address);
  CHECK(status == absl::DataLossError(absl::StrCat("worker ", address,
                                                   " says the next element needs 1048576 bytes of shared "
                                                   "memory, but the region it was offered holds 4063232")));
  CHECK(worker.capacities() == std::vector<int64_t>{kInitialSlotBytes});
}

TEST_CASE("shared_memory_needed asked again and again ends once the regions are at their largest",
          "[client][shared_memory]") {
  REQUIRE(!HostId().empty());
  // Always a byte past the region: the reader doubles its regions up to
  // kMaxSlotBytes, then asks over TCP, where the answer is refused.
  NeedyWorker worker(
      [](int64_t capacity) { return capacity > 0 ? SharedMemoryFitBytes(capacity) + 1 : 12345; });
  std::string address;
  const absl::Status status = AskThroughMemory(worker, &address);
  CHECK(status ==
        absl::DataLossError(absl::StrCat("worker ", address,
                                         " answered shared_memory_needed (12345 bytes) to a request "
                                         "that offered no shared memory")));
  constexpr int64_t kMiB = int64_t{1} << 20;
  CHECK(worker.capacities() ==
        std::vector<int64_t>{4 * kMiB, 8 * kMiB, 16 * kMiB, 32 * kMiB, 64 * kMiB, 128 * kMiB, 0});
  CHECK(kMaxSlotBytes == 128 * kMiB);
}

}  // namespace
}  // namespace sluice::reader
