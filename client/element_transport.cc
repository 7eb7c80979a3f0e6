#include "client/element_transport.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>

#include "absl/synchronization/notification.h"
#include "service/element_wire.h"
#include "service/grpc_util.h"
#include "service/metrics.h"

namespace sluice {
namespace {

constexpr auto kGetElementsTimeout = std::chrono::seconds(30);
constexpr char kGetElementsMethod[] = "/sluice.proto.WorkerService/GetElements";

// Calls GetElements as raw bytes, so that the response is decoded from
// gRPC's slices straight into tensors (service/element_wire.h).
class GrpcElementTransport : public ElementTransport {
 public:
  explicit GrpcElementTransport(const std::string& address) : stub_(MakeChannel(address)) {}

  absl::Status GetElements(const proto::GetElementsRequest& request, ElementsResponse* response) override {
    // Every request to a worker carries the protocol version from here.
    proto::GetElementsRequest versioned = request;
    *versioned.mutable_version() = CurrentVersion();
    const grpc::ByteBuffer request_bytes = SerializeToByteBuffer(versioned);
    grpc::ByteBuffer response_bytes;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kGetElementsTimeout);
    absl::Notification done;
    grpc::Status status;
    stub_.UnaryCall(&context, kGetElementsMethod, grpc::StubOptions(), &request_bytes, &response_bytes,
                    [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
    done.WaitForNotification();
    if (!status.ok()) return FromGrpcStatus(status);
    static Counter& received = ProcessMetrics()
                                   .AddCounter("sluice_client_bytes_received_total",
                                               "bytes of elements this client received from workers")
                                   .Get();
    received.Increment(static_cast<double>(response_bytes.Length()));
    return DecodeElementsResponse(&response_bytes, response);
  }

 private:
  grpc::GenericStub stub_;
};

}  // namespace

std::unique_ptr<ElementTransport> MakeGrpcElementTransport(const std::string& worker_address) {
  return std::make_unique<GrpcElementTransport>(worker_address);
}

}  // namespace sluice
