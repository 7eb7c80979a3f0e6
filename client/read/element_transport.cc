#include "client/read/element_transport.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/read/shared_memory_transport.h"
#include "service/element_wire.h"
#include "service/metrics.h"
#include "service/worker_client.h"

namespace sluice::reader {
namespace {

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
      : worker_(address, connections), frames_(frames) {}

  FrameSpecs* frame_specs() override { return frames_ ? &frame_specs_ : nullptr; }

  absl::Status GetElements(const proto::GetElementsRequest& request, ElementsResponse* response) override {
    proto::GetElementsRequest sent = request;
    if (frames_) {
      sent.set_frame(true);
      sent.set_frame_spec(frame_specs_.Latest());
    }
    grpc::ByteBuffer response_bytes;
    if (absl::Status status = worker_.GetElements(std::move(sent), &response_bytes); !status.ok())
      return status;
    absl::Status decoded = DecodeElementsResponse(&response_bytes, response, frame_specs());
    // A response in shared memory is counted where it is read.
    if (response->shared_memory_bytes == 0)
      CountReceived(*response, static_cast<int64_t>(response_bytes.Length()));
    if (!decoded.ok()) {
      return absl::Status(decoded.code(), absl::StrCat("the response of worker ", worker_.address(), ": ",
                                                       decoded.message()));
    }
    return CheckSharedMemoryFields(worker_.address(), request, *response);
  }

 private:
  WorkerClient worker_;
  const bool frames_;
  FrameSpecs frame_specs_;
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

}  // namespace sluice::reader
