// The proto element path: a serialized GetElementsResponse decoded as a
// reader does (service/element_wire.h: elements as protos or as a frame,
// compressed or not), and an ElementProto turned into tensors
// (common/proto_convert.h). The first byte picks which; any bytes give
// elements or an error, never a crash, and no allocation past what the
// bytes can hold.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/proto_convert.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "service/element_wire.h"
#include "sluice/proto/service.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice {
namespace {

std::vector<Element> SeedElements() {
  const ComponentNames names = MakeNames({"id", "pixels", "text"});
  std::vector<Element> elements;
  for (int64_t i = 0; i < 4; ++i) {
    Tensor pixels(DType::kFloat32, {2, 3});
    for (int64_t k = 0; k < 6; ++k) pixels.mutable_data<float>()[k] = static_cast<float>(i * k);
    elements.push_back(
        Element({Tensor::Scalar<int64_t>(i), std::move(pixels), Tensor::FromVector<std::string>({"a", "bc"})},
                names));
  }
  return elements;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& slice : slices)
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return bytes;
}

void WriteSeeds(const std::string& dir) {
  const std::vector<Element> elements = SeedElements();
  int n = 0;
  for (proto::WireCompression compression :
       {proto::COMPRESSION_NONE, proto::COMPRESSION_SNAPPY, proto::COMPRESSION_ZSTD}) {
    for (bool frame : {false, true}) {
      absl::StatusOr<grpc::ByteBuffer> encoded =
          EncodeElementsResponse(elements, false, 7, compression, {}, FrameRequest{frame, 0});
      if (!encoded.ok()) std::exit(1);
      fuzz::WriteSeed(dir, "response-" + std::to_string(n++), std::string(1, '\0') + Flatten(*encoded));
    }
  }
  proto::ElementProto element;
  ElementToProto(elements[1], &element);
  fuzz::WriteSeed(dir, "element", std::string(1, '\1') + element.SerializeAsString());
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return sluice::fuzz::WriteSeedsIfAsked(sluice::WriteSeeds);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (size_t{1} << 24)) return 0;
  const uint8_t mode = data[0] % 2;
  ++data;
  --size;
  if (mode == 0) {
    grpc::Slice slice(data, size);
    grpc::ByteBuffer buffer(&slice, 1);
    sluice::ElementsResponse response;
    sluice::FrameSpecs specs;
    (void)sluice::DecodeElementsResponse(&buffer, &response, &specs);
  } else {
    sluice::proto::ElementProto element;
    if (element.ParseFromArray(data, static_cast<int>(size))) (void)sluice::ElementFromProto(element);
  }
  return 0;
}
