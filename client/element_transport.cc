#include "client/element_transport.h"

#include <grpcpp/generic/generic_stub.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/shared_memory_transport.h"
#include "service/element_wire.h"
#include "service/grpc_util.h"
#include "service/message_bytes.h"
#include "service/metrics.h"

namespace sluice {
namespace {

constexpr auto kGetElementsTimeout = std::chrono::seconds(30);
constexpr char kGetElementsMethod[] = "/sluice.proto.WorkerService/GetElements";

// Shared-memory answers to a request that offered no region for them are
// refused: answered with shared_memory_needed, say, the reader would ask
// again forever, and an honest worker sends them only into a region.
absl::Status CheckSharedMemoryFields(const std::string& address, const proto::GetElementsRequest& request,
                                     const ElementsResponse& response) {
  auto refuse = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(
        "worker ", address, " answered ", what, " to a request that ",
        request.shm_session() == 0 ? "offered no shared memory" : "may not grow its shared memory"));
  };
  if (response.shared_memory_needed > 0 && !request.shm_resizable()) {
    return refuse(absl::StrCat("shared_memory_needed (", response.shared_memory_needed, " bytes)"));
  }
  if (request.shm_session() != 0) return absl::OkStatus();
  if (response.shared_memory_bytes > 0) {
    return refuse(absl::StrCat("shared_memory_bytes (", response.shared_memory_bytes, ")"));
  }
  if (!response.lent_tensors.empty())
    return refuse(absl::StrCat(response.lent_tensors.size(), " lent tensors"));
  return absl::OkStatus();
}

// Calls GetElements as raw bytes, so that the response is decoded from
// gRPC's slices straight into tensors (service/element_wire.h).
class GrpcElementTransport : public ElementTransport {
 public:
  GrpcElementTransport(const std::string& address, int connections, bool frames)
      : address_(address), frames_(frames) {
    // With one connection the channel may share gRPC's pool with the
    // process's other channels to the worker; with more, each channel gets
    // a connection of its own.
    const ChannelOptions options{.own_connection = connections > 1};
    for (int i = 0; i < connections; ++i) {
      stubs_.push_back(std::make_unique<grpc::GenericStub>(MakeChannel(address, options)));
    }
  }

  FrameSpecs* frame_specs() override { return frames_ ? &frame_specs_ : nullptr; }

  absl::Status GetElements(const proto::GetElementsRequest& request, ElementsResponse* response) override {
    // Every request to a worker carries the protocol version from here.
    proto::GetElementsRequest versioned = request;
    *versioned.mutable_version() = CurrentVersion();
    if (frames_) {
      versioned.set_frame(true);
      versioned.set_frame_spec(frame_specs_.Latest());
    }
    const grpc::ByteBuffer request_bytes = SerializeToByteBuffer(versioned);
    grpc::ByteBuffer response_bytes;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kGetElementsTimeout);
    absl::Notification done;
    grpc::Status status;
    grpc::GenericStub& stub = *stubs_[next_stub_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
    stub.UnaryCall(&context, kGetElementsMethod, grpc::StubOptions(), &request_bytes, &response_bytes,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    if (!status.ok()) return FromGrpcStatus(status);
    absl::Status decoded = DecodeElementsResponse(&response_bytes, response, frame_specs());
    // A response in shared memory is counted where it is read.
    if (response->shared_memory_bytes == 0)
      CountReceived(*response, static_cast<int64_t>(response_bytes.Length()));
    if (!decoded.ok()) {
      return absl::Status(decoded.code(),
                          absl::StrCat("the response of worker ", address_, ": ", decoded.message()));
    }
    return CheckSharedMemoryFields(address_, versioned, *response);
  }

 private:
  const std::string address_;
  const bool frames_;
  FrameSpecs frame_specs_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  std::atomic<size_t> next_stub_{0};
};

}  // namespace

void CountReceived(const ElementsResponse& response, int64_t bytes) {
  static Counter& received = ProcessMetrics()
                                 .AddCounter("sluice_client_bytes_received_total",
                                             "bytes of elements this client received from workers")
                                 .Get();
  static CounterFamily& responses =
      ProcessMetrics().AddCounter("sluice_client_responses_total",
                                  "GetElements responses with elements this client decoded, by the form of "
                                  "their elements (frame, or protos from a worker that predates frames)",
                                  {"form"});
  static Counter& frames = responses.WithLabels({"frame"});
  static Counter& protos = responses.WithLabels({"protos"});
  received.Increment(static_cast<double>(bytes));
  // An empty answer (a parked request's, the end's) has no form.
  if (!response.elements.empty()) (response.frame ? frames : protos).Increment();
}

bool WireFramesFromEnvironment() {
  // Read once: the environment is not changed safely while threads run.
  static const bool frames = [] {
    const char* value = std::getenv("SLUICE_WIRE_FRAMES");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return frames;
}

std::unique_ptr<ElementTransport> MakeGrpcElementTransport(const std::string& worker_address, int connections,
                                                           bool frames) {
  return std::make_unique<GrpcElementTransport>(worker_address,
                                                std::clamp(connections, 1, kMaxConnectionsPerWorker), frames);
}

std::unique_ptr<ElementTransport> MakeElementTransport(const std::string& worker_address,
                                                       const TransportOptions& options) {
  std::unique_ptr<ElementTransport> tcp = MakeGrpcElementTransport(worker_address, options.connections);
  if (!options.shared_memory) return tcp;
  return std::make_unique<SharedMemoryTransport>(worker_address, std::move(tcp));
}

}  // namespace sluice
