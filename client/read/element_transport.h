// ElementTransport: how a client fetches elements from a worker. The data
// service reads through this interface, so that transports faster than
// gRPC over TCP (shared memory for a worker on the same host, say) can be
// added without touching the reader.
#ifndef SLUICE_CLIENT_READ_ELEMENT_TRANSPORT_H_
#define SLUICE_CLIENT_READ_ELEMENT_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "service/element_wire.h"
#include "sluice/element.h"
#include "sluice/proto/service.pb.h"

namespace sluice::reader {

class ElementTransport {
 public:
  virtual ~ElementTransport() = default;
  // One round trip: up to request.max_elements() elements of a task,
  // decoded (and decompressed), with their position in the task's output.
  // The transport sets the protocol version. Thread-safe: several requests may be in flight at once.
  virtual absl::Status GetElements(const proto::GetElementsRequest& request, ElementsResponse* response) = 0;
  // The frame specs this transport's responses have carried, for decoding
  // one that leaves its spec out (null: it asks for no frames).
  virtual FrameSpecs* frame_specs() { return nullptr; }
};

// The most TCP connections a reader opens to one worker.
inline constexpr int kMaxConnectionsPerWorker = 16;

// False when SLUICE_WIRE_FRAMES=0 (read once per process): readers then
// ask for protos (the data_plane bench's baseline, and a way around a frame
// problem found in the field).
bool WireFramesFromEnvironment();

// gRPC to the worker's WorkerService over `connections` TCP connections of
// its own (1 to kMaxConnectionsPerWorker), which successive requests take
// in turn, asking for flat frames when `frames`. A response that does not
// decode, or that answers in shared memory a request that offered none
// (shared_memory_needed, say, which would have the reader ask forever),
// is an error naming the worker.
std::unique_ptr<ElementTransport> MakeGrpcElementTransport(const std::string& worker_address,
                                                           int connections = 1,
                                                           bool frames = WireFramesFromEnvironment());

// How a reader reaches its workers (DistributeOp.connections_per_worker
// and transport).
struct TransportOptions {
  int connections = 1;
  // Shared memory with a worker on this host (shared_memory_transport.h);
  // false for `transport: tcp`.
  bool shared_memory = true;
};

// Adds a decoded response to the client's sluice_client_bytes_received_total
// and sluice_client_responses_total{form}.
void CountReceived(const ElementsResponse& response, int64_t bytes);

// The transport `options` ask for.
std::unique_ptr<ElementTransport> MakeElementTransport(const std::string& worker_address,
                                                       const TransportOptions& options);

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_ELEMENT_TRANSPORT_H_
