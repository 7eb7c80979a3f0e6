// The element frame decoder (service/element_frame.h) on any bytes:
// elements or DataLoss, never a crash, and nothing allocated past the
// frame's own size. Each input decodes twice with one FrameSpecs, so that
// a frame which leaves its spec out finds the one the first decode added,
// and once in place (large tensors as views of the input).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "service/element_frame.h"
#include "service/element_wire.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice {
namespace {

using google::protobuf::io::CodedInputStream;

std::vector<Element> SeedElements(int variant) {
  const ComponentNames names = MakeNames({"ids", "image", "label"});
  std::vector<Element> elements;
  for (int64_t i = 0; i < 3 + variant; ++i) {
    std::vector<int64_t> ids(static_cast<size_t>(i % 4));
    for (size_t k = 0; k < ids.size(); ++k) ids[k] = i * 10 + static_cast<int64_t>(k);
    // 8 KiB or more: sent by reference, 64-byte aligned.
    Tensor image(DType::kUInt8, {variant == 0 ? 4 : 64, 64, 2});
    for (int64_t b = 0; b < image.num_elements(); ++b)
      image.mutable_data<uint8_t>()[b] = static_cast<uint8_t>(b + i);
    elements.push_back(Element({Tensor::FromVector<int64_t>(std::move(ids)), std::move(image),
                                Tensor::StringScalar(std::string(static_cast<size_t>(i % 5), 'a'))},
                               names));
  }
  return elements;
}

void WriteSeeds(const std::string& dir) {
  for (int variant = 0; variant < 2; ++variant) {
    for (uint64_t reader_spec : {uint64_t{0}, uint64_t{1}}) {
      std::optional<EncodedFrame> frame = EncodeFrame(SeedElements(variant), reader_spec);
      if (!frame.has_value()) std::exit(1);
      std::string bytes;
      for (const grpc::Slice& slice : frame->slices) {
        bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      }
      fuzz::WriteSeed(dir, "frame-" + std::to_string(variant) + "-" + std::to_string(reader_spec), bytes);
    }
  }
}

void Decode(const uint8_t* data, size_t size, FrameSpecs* specs,
            const std::shared_ptr<const void>& in_place) {
  CodedInputStream in(data, static_cast<int>(size));
  std::vector<Element> elements;
  (void)DecodeFrame(in, size, specs, &elements, in_place);
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return sluice::fuzz::WriteSeedsIfAsked(sluice::WriteSeeds);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 24)) return 0;
  sluice::FrameSpecs specs;
  sluice::Decode(data, size, &specs, nullptr);
  sluice::Decode(data, size, &specs, nullptr);
  // In place: a copy the views may keep, aligned as a gRPC slice would be.
  auto copy = std::make_shared<std::string>(reinterpret_cast<const char*>(data), size);
  sluice::Decode(reinterpret_cast<const uint8_t*>(copy->data()), size, nullptr, copy);
  return 0;
}
