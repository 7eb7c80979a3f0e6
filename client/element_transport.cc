#include "client/element_transport.h"

#include <chrono>

#include "common/compression.h"
#include "common/grpc_util.h"
#include "common/proto_convert.h"
#include "sluice/service.grpc.pb.h"

namespace sluice {
namespace {

constexpr auto kRpcTimeout = std::chrono::seconds(30);

class GrpcElementTransport : public ElementTransport {
 public:
  explicit GrpcElementTransport(const std::string& address)
      : stub_(proto::WorkerService::NewStub(MakeChannel(address))) {}

  absl::Status GetElements(const proto::GetElementsRequest& request, std::vector<Element>* elements,
                           bool* end_of_sequence) override {
    proto::GetElementsResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
    if (absl::Status status = FromGrpcStatus(stub_->GetElements(&context, request, &response));
        !status.ok()) {
      return status;
    }
    *end_of_sequence = response.end_of_sequence();
    return DecodeElements(response, elements);
  }

 private:
  std::unique_ptr<proto::WorkerService::Stub> stub_;
};

}  // namespace

std::unique_ptr<ElementTransport> MakeGrpcElementTransport(const std::string& worker_address) {
  return std::make_unique<GrpcElementTransport>(worker_address);
}

absl::Status DecodeElements(const proto::GetElementsResponse& response, std::vector<Element>* elements) {
  elements->reserve(elements->size() + response.elements_size() + response.compressed_elements_size());
  for (const proto::ElementProto& p : response.elements()) {
    absl::StatusOr<Element> e = ElementFromProto(p);
    if (!e.ok()) return e.status();
    elements->push_back(*std::move(e));
  }
  std::string bytes;
  proto::ElementProto decoded;
  for (const std::string& compressed : response.compressed_elements()) {
    if (absl::Status s = Decompress(response.compression(), compressed, &bytes); !s.ok()) return s;
    if (!decoded.ParseFromString(bytes)) return absl::DataLossError("a decompressed element does not parse");
    absl::StatusOr<Element> e = ElementFromProto(decoded);
    if (!e.ok()) return e.status();
    elements->push_back(*std::move(e));
  }
  return absl::OkStatus();
}

}  // namespace sluice
