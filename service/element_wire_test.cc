#include "service/element_wire.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "service/compression.h"
#include "service/element_frame.h"
#include "service/message_bytes.h"
#include "tests/testing/wire_test_helpers.h"

namespace sluice {
namespace {

std::vector<Element> Decode(grpc::ByteBuffer buffer, bool* end, absl::Status* status,
                            int64_t* first_index = nullptr) {
  ElementsResponse response;
  *status = DecodeElementsResponse(&buffer, &response);
  *end = response.end_of_sequence;
  if (first_index != nullptr) *first_index = response.first_index;
  return std::move(response.elements);
}

}  // namespace

TEST_CASE("element_wire: the encoding is a valid GetElementsResponse", "[wire]") {
  const std::vector<Element> elements = SampleElements();
  absl::StatusOr<grpc::ByteBuffer> encoded =
      EncodeElementsResponse(elements, true, 0, proto::COMPRESSION_NONE);
  REQUIRE(encoded.ok());
  proto::GetElementsResponse parsed;
  REQUIRE(parsed.ParseFromString(Flatten(*encoded)));
  proto::GetElementsResponse expected;
  for (const Element& e : elements) ElementToProto(e, expected.add_elements());
  expected.set_end_of_sequence(true);
  CHECK(parsed.SerializeAsString() == expected.SerializeAsString());
}

TEST_CASE("element_wire: a cross-trainer response's trainer_skipped, on every path",
          "[wire][cross_trainer]") {
  const std::vector<Element> elements = SampleElements();
  for (const proto::WireCompression compression : {proto::COMPRESSION_NONE, proto::COMPRESSION_SNAPPY}) {
    for (const bool frame : {false, true}) {
      absl::StatusOr<grpc::ByteBuffer> encoded =
          EncodeElementsResponse(elements, false, 12, compression, {}, FrameRequest{.frame = frame}, 345);
      REQUIRE(encoded.ok());
      proto::GetElementsResponse parsed;
      REQUIRE(parsed.ParseFromString(Flatten(*encoded)));
      CHECK(parsed.trainer_skipped() == 345);
      ElementsResponse decoded;
      FrameSpecs specs;
      REQUIRE(DecodeElementsResponse(&*encoded, &decoded, &specs).ok());
      CHECK(decoded.trainer_skipped == 345);
      CHECK(decoded.first_index == 12);
      CHECK(decoded.elements.size() == elements.size());
    }
  }
}

TEST_CASE("element_wire: large tensors go by reference, small ones are copied", "[wire]") {
  Tensor big = Iota(kZeroCopyMinBytes / 8);  // exactly the threshold
  Tensor small = Iota(kZeroCopyMinBytes / 8 - 1);
  const std::vector<Element> elements = {Element::Of(big), Element::Of(small)};
  const long before = big.buffer().use_count();
  {
    absl::StatusOr<grpc::ByteBuffer> encoded =
        EncodeElementsResponse(elements, false, 0, proto::COMPRESSION_NONE);
    REQUIRE(encoded.ok());
    // The big tensor's buffer is held by its slice; the small one is not.
    CHECK(big.buffer().use_count() == before + 1);
    CHECK(small.buffer().use_count() == 2);  // `small` and the element's copy
    std::vector<grpc::Slice> slices;
    REQUIRE(encoded->Dump(&slices).ok());
    bool found = false;
    for (const grpc::Slice& s : slices) found |= s.begin() == static_cast<const uint8_t*>(big.raw_data());
    CHECK(found);
  }
  CHECK(big.buffer().use_count() == before);  // released with the bytes
}

TEST_CASE("element_wire: decodes its own encoding, whatever the slicing", "[wire]") {
  const std::vector<Element> elements = SampleElements();
  const std::string bytes = Flatten(*EncodeElementsResponse(elements, false, 0, proto::COMPRESSION_NONE));
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, bytes.size()}) {
    bool end = true;
    absl::Status status;
    std::vector<Element> decoded = Decode(Sliced(bytes, piece), &end, &status);
    INFO("slices of " << piece << " bytes");
    REQUIRE(status.ok());
    CHECK_FALSE(end);
    REQUIRE(decoded.size() == elements.size());
    for (size_t i = 0; i < elements.size(); ++i) CHECK(decoded[i] == elements[i]);
    CHECK(*decoded[1].names == std::vector<std::string>{"ids", "weights"});
    CHECK(decoded[1].components[0].raw_data() != elements[1].components[0].raw_data());
    CHECK(reinterpret_cast<uintptr_t>(decoded[1].components[0].raw_data()) % kBufferAlignment == 0);
  }
}

TEST_CASE("element_wire: small tensors of a response share 64 KiB chunks, aligned", "[wire]") {
  // 2,000 elements of an int8 scalar and a 3-row int64 tensor (16 + 32
  // bytes with alignment), then one of 4,097 bytes: over the 4 KiB limit.
  std::vector<Element> elements;
  for (int64_t i = 0; i < 2000; ++i) {
    elements.push_back(Element({Tensor::Scalar<int8_t>(static_cast<int8_t>(i % 100)),
                                Tensor::FromVector<int64_t>({i, -i, i * 1000})}));
  }
  elements.push_back(Element::Of(Tensor::FromVector<std::string>({"s"})));
  elements.push_back(Element::Of(Tensor(DType::kUInt8, {4097})));
  const std::string bytes = Flatten(*EncodeElementsResponse(elements, false, 0, proto::COMPRESSION_NONE));
  bool end = true;
  absl::Status status;
  std::vector<Element> decoded = Decode(Sliced(bytes, 4096), &end, &status);
  REQUIRE(status.ok());
  REQUIRE(decoded.size() == elements.size());
  for (size_t i = 0; i < elements.size(); ++i) CHECK(decoded[i] == elements[i]);
  std::set<const TensorBuffer*> chunks;
  for (size_t i = 0; i < 2000; ++i) {
    for (const Tensor& t : decoded[i].components) {
      chunks.insert(t.buffer().get());
      CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0);
    }
  }
  // 2,000 x 48 bytes = 96,000 bytes: two chunks of 64 KiB.
  CHECK(chunks.size() == 2);
  CHECK(decoded[0].components[0].SharesBufferWith(decoded[0].components[1]));
  CHECK(decoded[0].components[1].SharesBufferWith(decoded[1].components[1]));
  // The large tensor has a buffer of its own.
  CHECK(decoded.back().components[0].buffer().use_count() == 1);
  CHECK(reinterpret_cast<uintptr_t>(decoded.back().components[0].raw_data()) % kBufferAlignment == 0);
  // A chunk outlives the response while one of its tensors is held.
  const Tensor kept = decoded[1999].components[1];
  decoded.clear();
  CHECK(kept.data<int64_t>()[2] == 1999000);
}

TEST_CASE("element_wire: decodes what protobuf writes, in any field order", "[wire]") {
  // Content before dtype and shape, unpacked dimensions, an unknown field:
  // all valid protobuf that this encoder never writes.
  std::string tensor;
  tensor += '\x1a';  // content (3), length 8
  tensor += '\x08';
  const int64_t value = 0x0102030405060708;
  tensor.append(reinterpret_cast<const char*>(&value), 8);
  tensor += std::string("\x12\x04\x08\x01\x08\x01", 6);  // shape {dims: 1, dims: 1}, unpacked
  tensor += std::string("\x08\x05", 2);                  // dtype int64
  tensor += std::string("\x78\x2a", 2);                  // field 15 varint 42: unknown
  std::string element = std::string("\x0a", 1) + static_cast<char>(tensor.size()) + tensor;
  std::string response = std::string("\x0a", 1) + static_cast<char>(element.size()) + element +
                         std::string("\x10\x01", 2);  // end_of_sequence
  bool end = false;
  absl::Status status;
  std::vector<Element> decoded = Decode(Sliced(response, 3), &end, &status);
  REQUIRE(status.ok());
  CHECK(end);
  REQUIRE(decoded.size() == 1);
  CHECK(decoded[0].components[0] == *Tensor::FromVector<int64_t>({value}, {1, 1}));
}

TEST_CASE("element_wire: a worker's task_not_here travels alone", "[wire]") {
  proto::GetElementsResponse not_here;
  not_here.set_task_not_here(true);
  grpc::ByteBuffer bytes = SerializeToByteBuffer(not_here);
  ElementsResponse decoded;
  REQUIRE(DecodeElementsResponse(&bytes, &decoded).ok());
  CHECK(decoded.task_not_here);
  CHECK(decoded.elements.empty());
  CHECK_FALSE(decoded.end_of_sequence);
  // An encoder's answer with elements never says it.
  absl::StatusOr<grpc::ByteBuffer> encoded =
      EncodeElementsResponse(SampleElements(), false, 0, proto::COMPRESSION_NONE);
  REQUIRE(encoded.ok());
  ElementsResponse with_elements;
  REQUIRE(DecodeElementsResponse(&*encoded, &with_elements).ok());
  CHECK_FALSE(with_elements.task_not_here);
}

TEST_CASE("element_wire: first_index travels, in both encodings", "[wire]") {
  for (auto compression : {proto::COMPRESSION_NONE, proto::COMPRESSION_ZSTD}) {
    absl::StatusOr<grpc::ByteBuffer> encoded =
        EncodeElementsResponse(SampleElements(), false, int64_t{1} << 40, compression);
    REQUIRE(encoded.ok());
    proto::GetElementsResponse parsed;
    REQUIRE(ParseFromByteBuffer(*encoded, &parsed));
    CHECK(parsed.first_index() == int64_t{1} << 40);
    bool end = true;
    absl::Status status;
    int64_t first_index = 0;
    CHECK(Decode(*encoded, &end, &status, &first_index).size() == 4);
    REQUIRE(status.ok());
    CHECK(first_index == int64_t{1} << 40);
  }
}

TEST_CASE("element_wire: exactly_once's split tags travel, in both encodings", "[wire]") {
  const SplitTags tags{{5, 5, 6, 9}, {0, 1, 0, 300}, {4, 5, 1234567}};
  for (auto compression : {proto::COMPRESSION_NONE, proto::COMPRESSION_SNAPPY}) {
    absl::StatusOr<grpc::ByteBuffer> encoded =
        EncodeElementsResponse(SampleElements(), true, 8, compression, tags);
    REQUIRE(encoded.ok());
    // What protobuf reads...
    proto::GetElementsResponse parsed;
    REQUIRE(ParseFromByteBuffer(*encoded, &parsed));
    CHECK(std::vector<int64_t>(parsed.split_positions().begin(), parsed.split_positions().end()) ==
          std::vector<int64_t>{0, 1, 0, 300});
    // ...and the decoder, whatever the slicing.
    ElementsResponse response;
    grpc::ByteBuffer sliced = Sliced(parsed.SerializeAsString(), 3);
    REQUIRE(DecodeElementsResponse(&sliced, &response).ok());
    CHECK(response.tags == tags);
    CHECK(response.elements.size() == 4);
    CHECK(response.end_of_sequence);
  }
  // Tags for some elements only are damage.
  absl::StatusOr<grpc::ByteBuffer> encoded =
      EncodeElementsResponse(SampleElements(), false, 0, proto::COMPRESSION_NONE, SplitTags{{1}, {0}, {}});
  REQUIRE(encoded.ok());
  ElementsResponse response;
  absl::Status status = DecodeElementsResponse(&*encoded, &response);
  REQUIRE(absl::IsDataLoss(status));
  CHECK(status.message() == "GetElements response: 4 elements but 1 split tags and 1 positions");
}

TEST_CASE("element_wire: compressed responses round-trip", "[wire]") {
  const std::vector<Element> elements = SampleElements();
  for (auto compression : {proto::COMPRESSION_SNAPPY, proto::COMPRESSION_ZSTD}) {
    absl::StatusOr<grpc::ByteBuffer> encoded = EncodeElementsResponse(elements, true, 0, compression);
    REQUIRE(encoded.ok());
    proto::GetElementsResponse parsed;
    REQUIRE(ParseFromByteBuffer(*encoded, &parsed));
    CHECK(parsed.compression() == compression);
    CHECK(parsed.compressed_elements_size() == 4);
    CHECK(parsed.elements_size() == 0);
    bool end = false;
    absl::Status status;
    std::vector<Element> decoded = Decode(*encoded, &end, &status);
    REQUIRE(status.ok());
    CHECK(end);
    CHECK(decoded == elements);
  }
}

TEST_CASE("element_wire: an empty response", "[wire]") {
  absl::StatusOr<grpc::ByteBuffer> encoded = EncodeElementsResponse({}, false, 0, proto::COMPRESSION_NONE);
  REQUIRE(encoded.ok());
  CHECK(encoded->Length() == 0);
  bool end = true;
  absl::Status status;
  CHECK(Decode(*encoded, &end, &status).empty());
  CHECK(status.ok());
  CHECK_FALSE(end);
}

TEST_CASE("element_wire: a truncated response is an error, or a shorter valid one", "[wire]") {
  const std::vector<Element> elements = SampleElements();
  const std::string bytes = Flatten(*EncodeElementsResponse(elements, true, 0, proto::COMPRESSION_NONE));
  // gRPC frames every message with its length, so truncation cannot reach
  // the decoder; still, no cut may crash it. A cut between two elements is
  // a valid shorter response (protobuf has no overall length); every other
  // cut is an error.
  int errors = 0;
  std::vector<size_t> valid_cuts;
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    bool end = false;
    absl::Status status;
    std::vector<Element> decoded = Decode(Sliced(bytes.substr(0, cut), 5), &end, &status);
    if (!status.ok()) {
      ++errors;
      continue;
    }
    valid_cuts.push_back(cut);
    CHECK_FALSE(end);
    REQUIRE(decoded.size() < elements.size() + 1);
    for (size_t i = 0; i < decoded.size(); ++i) CHECK(decoded[i] == elements[i]);
  }
  // The cuts after elements 1, 2, 3 and 4 (the last one before end_of_sequence).
  CHECK(valid_cuts.size() == 4);
  CHECK(valid_cuts.back() == bytes.size() - 2);
  CHECK(errors == static_cast<int>(bytes.size()) - 1 - 4);
}

TEST_CASE("element_wire: a shared-memory marker's lent tensors travel, and a malformed one is refused",
          "[wire]") {
  proto::GetElementsResponse marker;
  marker.set_shared_memory_bytes(4096);
  proto::LentTensor* lent = marker.add_lent_tensors();
  lent->set_element(2);
  lent->set_component(1);
  lent->set_offset(8192);
  lent->add_shape(64);
  lent->add_shape(3);
  lent->set_lease(77);
  std::string bytes = marker.SerializeAsString();
  grpc::ByteBuffer buffer = Sliced(bytes, bytes.size());
  ElementsResponse response;
  REQUIRE(DecodeElementsResponse(&buffer, &response).ok());
  CHECK(response.shared_memory_bytes == 4096);
  REQUIRE(response.lent_tensors.size() == 1);
  CHECK(response.lent_tensors[0].element() == 2);
  CHECK(response.lent_tensors[0].component() == 1);
  CHECK(response.lent_tensors[0].offset() == 8192);
  CHECK(response.lent_tensors[0].shape_size() == 2);
  CHECK(response.lent_tensors[0].lease() == 77);

  // Field 13 holding bytes that are no LentTensor (a varint cut short).
  bytes = std::string("\x6a\x02\x08\xff", 4);
  buffer = Sliced(bytes, bytes.size());
  response = ElementsResponse{};
  CHECK(DecodeElementsResponse(&buffer, &response) ==
        absl::DataLossError("malformed GetElements response at byte 4: a lent tensor"));
}

TEST_CASE("element_wire: malformed messages name the problem", "[wire]") {
  auto decode = [](const std::string& bytes) {
    bool end = false;
    absl::Status status;
    Decode(Sliced(bytes, bytes.size()), &end, &status);
    return status;
  };
  // An element whose length runs past the message.
  CHECK(decode(std::string("\x0a\x05\x0a", 3)) ==
        absl::DataLossError("malformed GetElements response at byte 2: an element is truncated"));
  // Wire type 3 (groups) for field 1.
  CHECK(decode(std::string("\x0b", 1)) ==
        absl::DataLossError("malformed GetElements response at byte 1: unsupported wire type 3 of field 1"));
  // int64 of shape [2] with 8 bytes of content.
  std::string tensor = std::string("\x08\x05\x12\x03\x0a\x01\x02\x1a\x08", 9) + std::string(8, '\0');
  std::string element = std::string("\x0a", 1) + static_cast<char>(tensor.size()) + tensor;
  std::string response = std::string("\x0a", 1) + static_cast<char>(element.size()) + element;
  CHECK(decode(response) == absl::InvalidArgumentError("int64 tensor of shape [2] needs 16 bytes, got 8"));
  // A shape whose element count overflows: refused before any allocation.
  tensor = std::string("\x08\x05\x12\x16\x0a\x14", 6);
  for (int i = 0; i < 2; ++i) tensor += std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 9) + '\x01';
  tensor += std::string("\x1a\x08", 2) + std::string(8, '\0');
  element = std::string("\x0a", 1) + static_cast<char>(tensor.size()) + tensor;
  response = std::string("\x0a", 1) + static_cast<char>(element.size()) + element;
  absl::Status status = decode(response);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(
      status.message() ==
      "int64 tensor of shape [9223372036854775807, 1, 9223372036854775807, 1] needs more than the 8 bytes it "
      "got");
}

TEST_CASE("element_wire: a response's decompressed frame and elements count against one limit", "[wire]") {
  // A compressed frame of the sample elements, then a compressed element
  // (a zstd header alone) declaring a byte more than the limit leaves.
  // Elements of one spec, which a frame carries.
  std::vector<Element> same_spec(3);
  for (Element& element : same_spec) element.components.push_back(Iota(100));
  absl::StatusOr<grpc::ByteBuffer> encoded =
      EncodeElementsResponse(same_spec, false, 0, proto::COMPRESSION_ZSTD, {}, FrameRequest{.frame = true});
  REQUIRE(encoded.ok());
  proto::GetElementsResponse response;
  REQUIRE(response.ParseFromString(Flatten(*encoded)));
  std::string frame;
  REQUIRE(!response.frame().empty());
  REQUIRE(Decompress(proto::COMPRESSION_ZSTD, response.frame(), &frame).ok());
  const uint64_t left = kMaxDecompressedBytes - frame.size();
  std::string header("\x28\xb5\x2f\xfd\xe0", 5);
  for (int i = 0; i < 8; ++i) header += static_cast<char>((left + 1) >> (8 * i));
  response.add_compressed_elements(header);
  const std::string bytes = response.SerializeAsString();
  grpc::ByteBuffer buffer = Sliced(bytes, bytes.size());
  ElementsResponse decoded;
  CHECK(DecodeElementsResponse(&buffer, &decoded) ==
        absl::DataLossError(absl::StrCat("GetElements response: its 1 compressed elements declare ", left + 1,
                                         " bytes decompressed, past the ", left, " they may have")));
}

TEST_CASE("proto_convert: a huge shape is refused before allocating", "[proto]") {
  proto::TensorProto p;
  p.set_dtype(proto::DT_FLOAT32);
  p.mutable_shape()->add_dims(int64_t{1} << 40);
  p.set_content(std::string(4, '\0'));
  CHECK(
      TensorFromProto(p).status() ==
      absl::InvalidArgumentError("float32 tensor of shape [1099511627776] needs 4398046511104 bytes, got 4"));
  p.set_dtype(proto::DT_STRING);
  p.clear_content();
  CHECK(TensorFromProto(p).status() ==
        absl::InvalidArgumentError("string tensor of shape [1099511627776] has 0 values"));
}

}  // namespace sluice
