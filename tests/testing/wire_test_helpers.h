// Helpers the wire format's tests share: responses as bytes, cut into
// slices as gRPC hands them over, and sample elements.
#ifndef SLUICE_TESTS_TESTING_WIRE_TEST_HELPERS_H_
#define SLUICE_TESTS_TESTING_WIRE_TEST_HELPERS_H_

#include <grpcpp/support/byte_buffer.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sluice/element.h"

namespace sluice {

inline std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  REQUIRE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

// The same bytes cut into slices of `piece` bytes, as gRPC hands over a
// message that arrived in many reads.
inline grpc::ByteBuffer Sliced(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += piece)
    slices.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  if (slices.empty()) slices.emplace_back("", 0);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

inline Tensor Iota(int64_t n) {
  std::vector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = i * 3;
  return Tensor::FromVector<int64_t>(std::move(values));
}

inline std::vector<Element> SampleElements() {
  std::vector<Element> elements;
  elements.push_back(Element::Of(Tensor::Scalar<int64_t>(7)));
  // Large enough to go by reference (8 KiB), and a 2-D float tensor.
  elements.push_back(Element({Iota(1024), *Tensor::FromVector<float>({1.5f, -2, 3, 4, 5, 6}, {2, 3})},
                             MakeNames({"ids", "weights"})));
  elements.push_back(Element::Of(Tensor::FromVector<std::string>({"a", "", "hello world"})));
  elements.push_back(Element::Of(Tensor(DType::kInt32, {0, 4})));  // no content bytes at all
  return elements;
}

}  // namespace sluice

#endif  // SLUICE_TESTS_TESTING_WIRE_TEST_HELPERS_H_
