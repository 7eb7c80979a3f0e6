#include "service/element_frame.h"

#include <google/protobuf/io/coded_stream.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "service/element_wire.h"
#include "tests/testing/wire_test_helpers.h"

namespace sluice {
namespace {

using google::protobuf::io::CodedInputStream;

// 100 elements of one spec: "ids" int64 of a length that varies (small),
// "image" uint8 [64, 64, 2] (8 KiB: by reference), "label" a string.
std::vector<Element> FrameElements() {
  const ComponentNames names = MakeNames({"ids", "image", "label"});
  std::vector<Element> elements;
  for (int64_t i = 0; i < 100; ++i) {
    std::vector<int64_t> ids(static_cast<size_t>(i % 7));
    for (size_t k = 0; k < ids.size(); ++k) ids[k] = i * 10 + static_cast<int64_t>(k);
    Tensor image(DType::kUInt8, {64, 64, 2});
    for (int64_t b = 0; b < image.num_elements(); ++b)
      image.mutable_data<uint8_t>()[b] = static_cast<uint8_t>(b + i);
    elements.push_back(Element({Tensor::FromVector<int64_t>(std::move(ids)), std::move(image),
                                Tensor::StringScalar(std::string(static_cast<size_t>(i % 5), 'a' + i % 26))},
                               names));
  }
  return elements;
}

grpc::ByteBuffer Encode(const std::vector<Element>& elements, uint64_t reader_spec,
                        proto::WireCompression compression = proto::COMPRESSION_NONE,
                        const SplitTags& tags = {}) {
  absl::StatusOr<grpc::ByteBuffer> encoded =
      EncodeElementsResponse(elements, true, 42, compression, tags, FrameRequest{true, reader_spec});
  REQUIRE(encoded.ok());
  return *std::move(encoded);
}

absl::StatusOr<ElementsResponse> Decode(const std::string& bytes, FrameSpecs* specs, size_t piece = 4096) {
  grpc::ByteBuffer sliced = Sliced(bytes, piece);
  ElementsResponse response;
  if (absl::Status s = DecodeElementsResponse(&sliced, &response, specs); !s.ok()) return s;
  return response;
}

// DecodeFrame alone, on raw frame bytes.
absl::Status DecodeRaw(const std::string& frame, FrameSpecs* specs, std::vector<Element>* elements) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(frame.data()), static_cast<int>(frame.size()));
  return DecodeFrame(in, frame.size(), specs, elements);
}

std::string FrameBytes(const std::vector<Element>& elements, uint64_t reader_spec = 0) {
  proto::GetElementsResponse parsed;
  REQUIRE(parsed.ParseFromString(Flatten(Encode(elements, reader_spec))));
  return parsed.frame();
}

}  // namespace

TEST_CASE("element_frame: a response is one frame, and decodes whatever the slicing", "[wire][frame]") {
  const std::vector<Element> elements = FrameElements();
  const std::string bytes = Flatten(Encode(elements, 0));
  proto::GetElementsResponse parsed;
  REQUIRE(parsed.ParseFromString(bytes));  // still a GetElementsResponse protobuf reads
  CHECK(parsed.elements_size() == 0);
  CHECK(parsed.first_index() == 42);
  CHECK(parsed.end_of_sequence());
  // Head: 40 header + 36 spec (4 + 3 * 8 + 8 name bytes, padded to 80) +
  // shapes 8 + (8 + 24) + 8 + table 100 * (16 + 8) = 2,528; then data.
  CHECK(parsed.frame().size() > 100 * 8192);
  for (size_t piece : {size_t{1}, size_t{13}, size_t{4096}, bytes.size()}) {
    INFO("slices of " << piece << " bytes");
    FrameSpecs specs;
    absl::StatusOr<ElementsResponse> decoded = Decode(bytes, &specs, piece);
    REQUIRE(decoded.ok());
    CHECK(decoded->first_index == 42);
    CHECK(decoded->end_of_sequence);
    REQUIRE(decoded->elements.size() == 100);
    for (size_t i = 0; i < elements.size(); ++i) CHECK(decoded->elements[i] == elements[i]);
    const std::vector<Element>& got = decoded->elements;
    // The small tensors point into one buffer; each large one has its own,
    // aligned; every element shares one names vector.
    CHECK(got[1].components[0].SharesBufferWith(got[99].components[0]));
    CHECK_FALSE(got[1].components[1].SharesBufferWith(got[2].components[1]));
    CHECK_FALSE(got[1].components[1].SharesBufferWith(got[1].components[0]));
    CHECK(reinterpret_cast<uintptr_t>(got[5].components[1].raw_data()) % kBufferAlignment == 0);
    CHECK(reinterpret_cast<uintptr_t>(got[6].components[0].raw_data()) % 16 == 0);
    CHECK(got[0].names == got[99].names);
    CHECK(*got[0].names == std::vector<std::string>{"ids", "image", "label"});
    CHECK(specs.Latest() != 0);
  }
}

TEST_CASE("element_frame: large tensors go by reference, and are released with the bytes", "[wire][frame]") {
  const std::vector<Element> elements = FrameElements();
  const Tensor& image = elements[3].components[1];
  const long before = image.buffer().use_count();
  {
    const grpc::ByteBuffer encoded = Encode(elements, 0);
    CHECK(image.buffer().use_count() == before + 1);
    std::vector<grpc::Slice> slices;
    REQUIRE(encoded.Dump(&slices).ok());
    bool found = false;
    for (const grpc::Slice& s : slices) found |= s.begin() == static_cast<const uint8_t*>(image.raw_data());
    CHECK(found);
  }
  CHECK(image.buffer().use_count() == before);
}

TEST_CASE("element_frame: the spec travels once, and a frame without it needs the reader's",
          "[wire][frame]") {
  const std::vector<Element> elements = FrameElements();
  FrameSpecs specs;
  CHECK(specs.Latest() == 0);
  const std::string first = Flatten(Encode(elements, 0));
  REQUIRE(Decode(first, &specs).ok());
  const uint64_t id = specs.Latest();
  REQUIRE(id != 0);
  const std::string later = Flatten(Encode(elements, id));
  // The spec is 4 + 3 * 8 + 13 name bytes = 41, padded with the header to
  // 88 (48 bytes of spec); the head then pads the first image to a 64-byte
  // boundary in the response, so the difference is rounded up to 64.
  CHECK(first.size() - later.size() == 64);
  absl::StatusOr<ElementsResponse> decoded = Decode(later, &specs);
  REQUIRE(decoded.ok());
  CHECK(decoded->elements == elements);
  CHECK(*decoded->elements[0].names == std::vector<std::string>{"ids", "image", "label"});
  // A reader that was never sent the spec cannot read the frame.
  FrameSpecs fresh;
  absl::Status status = Decode(later, &fresh).status();
  CHECK(absl::IsDataLoss(status));
  CHECK(status.message() == "malformed element frame at byte 8: the frame leaves out spec " +
                                std::to_string(id) + ", which this reader was never sent");
  // A different spec's id leaves nothing out.
  CHECK(Flatten(Encode(elements, id + 1)).size() == first.size());
}

TEST_CASE("element_frame: elements of different specs go as protos", "[wire][frame]") {
  const std::vector<Element> elements = SampleElements();  // four specs
  proto::GetElementsResponse parsed;
  REQUIRE(parsed.ParseFromString(Flatten(Encode(elements, 0))));
  CHECK(parsed.frame().empty());
  CHECK(parsed.elements_size() == 4);
  FrameSpecs specs;
  absl::StatusOr<ElementsResponse> decoded = Decode(Flatten(Encode(elements, 0)), &specs);
  REQUIRE(decoded.ok());
  CHECK(decoded->elements == elements);
  CHECK(specs.Latest() == 0);
  // Same dtypes but other names is another spec too.
  std::vector<Element> renamed = {Element({Iota(3)}, MakeNames({"a"})), Element({Iota(3)}, MakeNames({"b"}))};
  REQUIRE(parsed.ParseFromString(Flatten(Encode(renamed, 0))));
  CHECK(parsed.elements_size() == 2);
}

TEST_CASE("element_frame: compressed frames and split tags round-trip", "[wire][frame]") {
  const std::vector<Element> elements = FrameElements();
  SplitTags tags;
  for (int64_t i = 0; i < 100; ++i) {
    tags.split_seqs.push_back(3 + i / 50);
    tags.split_positions.push_back(i % 50);
  }
  tags.completed_splits = {3};
  tags.completed_split_sizes = {50};
  for (auto compression : {proto::COMPRESSION_NONE, proto::COMPRESSION_SNAPPY, proto::COMPRESSION_ZSTD}) {
    INFO("compression " << compression);
    const std::string bytes = Flatten(Encode(elements, 0, compression, tags));
    proto::GetElementsResponse parsed;
    REQUIRE(parsed.ParseFromString(bytes));
    CHECK(parsed.compression() == compression);
    CHECK_FALSE(parsed.frame().empty());
    CHECK(parsed.compressed_elements_size() == 0);
    if (compression != proto::COMPRESSION_NONE) CHECK(parsed.frame().size() < 100 * 8192 / 2);
    FrameSpecs specs;
    absl::StatusOr<ElementsResponse> decoded = Decode(bytes, &specs, 7);
    REQUIRE(decoded.ok());
    CHECK(decoded->elements == elements);
    CHECK(decoded->tags == tags);
    CHECK(decoded->first_index == 42);
  }
}

TEST_CASE("element_frame: no truncation or corruption crashes the decoder", "[wire][frame]") {
  std::vector<Element> elements = FrameElements();
  elements.resize(12);
  const std::string frame = FrameBytes(elements);
  // Every cut is an error: a frame carries its own size.
  for (size_t cut = 0; cut < frame.size(); cut += (cut < 4096 ? 1 : 97)) {
    FrameSpecs specs;
    std::vector<Element> decoded;
    CodedInputStream in(reinterpret_cast<const uint8_t*>(frame.data()), static_cast<int>(cut));
    CHECK(absl::IsDataLoss(DecodeFrame(in, frame.size(), &specs, &decoded)));
  }
  // Random bytes changed in the head: an error or elements, never a crash.
  std::mt19937_64 random(7);
  int errors = 0;
  const size_t head = 3000;  // the header, spec, tables and small data
  for (int trial = 0; trial < 3000; ++trial) {
    std::string damaged = frame;
    for (int k = 0; k < 3; ++k) damaged[random() % head] = static_cast<char>(random());
    FrameSpecs specs;
    std::vector<Element> decoded;
    absl::Status status = DecodeRaw(damaged, &specs, &decoded);
    if (!status.ok()) {
      ++errors;
      CHECK((absl::IsDataLoss(status) || absl::IsResourceExhausted(status)));
    }
  }
  CHECK(errors > 100);
}

TEST_CASE("element_frame: malformed frames name the problem", "[wire][frame]") {
  const std::vector<Element> elements = {Element({Iota(4)}), Element({Iota(4)})};
  const std::string frame = FrameBytes(elements);
  std::vector<Element> decoded;
  FrameSpecs specs;
  REQUIRE(DecodeRaw(frame, &specs, &decoded).ok());
  CHECK(decoded == elements);
  auto damaged = [&](size_t at, uint64_t value, size_t width) {
    std::string bytes = frame;
    std::memcpy(bytes.data() + at, &value, width);
    std::vector<Element> out;
    FrameSpecs fresh;
    return DecodeRaw(bytes, &fresh, &out);
  };
  CHECK(damaged(0, 0x12345678, 4) ==
        absl::DataLossError("malformed element frame at byte 0: not a frame (wrong magic)"));
  CHECK(damaged(32, 99, 8) ==
        absl::DataLossError(absl::StrCat("malformed element frame at byte 32: the header says 99 "
                                         "bytes, the frame has ",
                                         frame.size())));
  // Spec: 4 + 8 = 12 bytes at 40; shapes from 56: uniform [4]; table from 72.
  CHECK(damaged(40 + 4, 99, 1) ==
        absl::DataLossError("malformed element frame at byte 40: the spec does not hash to its id"));
  CHECK(damaged(56, 7, 8) ==
        absl::DataLossError("malformed element frame at byte 56: component 0's shape mode is 7"));
  CHECK(damaged(64, uint64_t{1} << 61, 8) ==
        absl::DataLossError(
            "malformed element frame at byte 96: a tensor of shape [2305843009213693952] is larger "
            "than the frame"));
  CHECK(damaged(72, 3, 8) ==
        absl::DataLossError("malformed element frame at byte 3: a tensor of 32 bytes does not fit the head"));
  CHECK(damaged(72, frame.size() - 16, 8) ==
        absl::DataLossError(absl::StrCat("malformed element frame at byte ", frame.size() - 16,
                                         ": a tensor of 32 bytes does not fit the head")));
}

TEST_CASE("element_frame: what a damaged frame may not make the reader allocate", "[wire][frame]") {
  auto decode = [](const std::string& frame) {
    std::vector<Element> out;
    FrameSpecs specs;
    return DecodeRaw(frame, &specs, &out);
  };
  auto put = [](std::string* bytes, size_t at, int64_t value) { std::memcpy(bytes->data() + at, &value, 8); };
  // Shapes [0, 0, 0], uniform: at 40 the spec (4 + 8 bytes), at 56 the
  // shape mode, at 64 the dims. [2^40, 2^40, 0] has no count (int64
  // overflows before the 0), for numbers and strings alike.
  for (DType dtype : {DType::kInt64, DType::kString}) {
    std::string frame =
        FrameBytes({Element({Tensor(dtype, {0, 0, 0})}), Element({Tensor(dtype, {0, 0, 0})})});
    REQUIRE(decode(frame).ok());
    put(&frame, 64, int64_t{1} << 40);
    put(&frame, 72, int64_t{1} << 40);
    const absl::Status status = decode(frame);
    INFO(status.ToString());
    CHECK(absl::IsDataLoss(status));
    CHECK_THAT(std::string(status.message()), Catch::Contains("[1099511627776, 1099511627776, 0]"));
  }
  // Two tensors at one offset: small tensors may not overlap (nor may
  // strings), so that they never take more than the head's bytes. Spec
  // 12 bytes, shapes from 56 (mode and [4]), table from 72.
  std::string numbers = FrameBytes({Element({Iota(4)}), Element({Iota(4)})});
  std::string same = numbers;
  std::memcpy(same.data() + 80, numbers.data() + 72, 8);
  CHECK(decode(same) ==
        absl::DataLossError("malformed element frame at byte 96: a tensor of 32 bytes does not fit "
                            "the head"));
  std::string strings =
      FrameBytes({Element({Tensor::StringScalar("abc")}), Element({Tensor::StringScalar("de")})});
  REQUIRE(decode(strings).ok());
  std::memcpy(strings.data() + 72, strings.data() + 64, 8);  // the second's offset is the first's
  CHECK(decode(strings) ==
        absl::DataLossError(
            "malformed element frame at byte 80: string tensor of shape [] does not fit the head"));
  // Empty tensors with long shapes, 8 table bytes each: what they decode to
  // is bounded by the frame's size.
  std::vector<Element> empty;
  Shape long_shape(100, 1);
  long_shape[0] = 0;
  for (int i = 0; i < 5000; ++i) empty.push_back(Element({Tensor(DType::kUInt8, long_shape)}));
  const absl::Status bounded = decode(FrameBytes(empty));
  CHECK(absl::IsDataLoss(bounded));
  CHECK_THAT(std::string(bounded.message()),
             Catch::EndsWith("the frame decodes to more than 32 times its size in tensors and shapes"));
  empty.resize(500);  // within the bound
  CHECK(decode(FrameBytes(empty)).ok());
}

TEST_CASE("element_frame: a reader keeps every spec it was sent, up to 8", "[wire][frame]") {
  FrameSpecs specs;
  for (uint64_t id = 1; id <= 10; ++id) {
    auto spec = std::make_shared<FrameSpec>();
    spec->id = id;
    specs.Add(spec);
  }
  // None is dropped, so a request that named one finds it; the 9th and
  // 10th are not kept, and frames of them carry them.
  for (uint64_t id = 1; id <= 8; ++id) CHECK(specs.Find(id) != nullptr);
  CHECK(specs.Find(9) == nullptr);
  CHECK(specs.Latest() == 8);
}

TEST_CASE("element_frame: ElementWireBound bounds both encodings", "[wire][frame]") {
  std::vector<Element> all = FrameElements();
  for (Element& e : SampleElements()) all.push_back(e);
  for (const Element& e : all) {
    proto::ElementProto p;
    ElementToProto(e, &p);
    CHECK(ElementWireBound(e) >= p.ByteSizeLong() + 6);  // with its field header
  }
  const std::vector<Element> elements = FrameElements();
  size_t bound = 0;
  for (const Element& e : elements) bound += ElementWireBound(e);
  const std::optional<EncodedFrame> frame = EncodeFrame(elements, 0);
  REQUIRE(frame.has_value());
  // The header, spec and shared shapes are per response, within gRPC's
  // 4 MiB of headroom; the rest is within the bound.
  CHECK(frame->bytes <= bound + 256);
}

namespace {

// `bytes` copied `shift` bytes past a 64-byte boundary; the buffer owns them.
std::shared_ptr<TensorBuffer> Placed(const std::string& bytes, size_t shift) {
  std::shared_ptr<TensorBuffer> buffer =
      TensorBuffer::Allocate(DType::kUInt8, static_cast<int64_t>(bytes.size() + shift), /*zeroed=*/false);
  std::memcpy(static_cast<char*>(buffer->data()) + shift, bytes.data(), bytes.size());
  return buffer;
}

absl::StatusOr<ElementsResponse> DecodePlaced(const std::shared_ptr<TensorBuffer>& buffer, size_t shift,
                                              size_t size, const std::shared_ptr<const void>& in_place) {
  grpc::Slice slice(static_cast<char*>(buffer->data()) + shift, size, grpc::Slice::STATIC_SLICE);
  grpc::ByteBuffer bytes(&slice, 1);
  ElementsResponse response;
  FrameSpecs specs;
  if (absl::Status s = DecodeElementsResponse(&bytes, &response, &specs, in_place); !s.ok()) return s;
  return response;
}

bool Within(const Tensor& t, const std::shared_ptr<TensorBuffer>& buffer, size_t size) {
  const auto* data = static_cast<const char*>(t.raw_data());
  const auto* begin = static_cast<const char*>(buffer->data());
  return data >= begin && data + t.ByteSize() <= begin + size;
}

}  // namespace

TEST_CASE("element_frame: in place, large tensors stay in the bytes they arrived in", "[wire][frame]") {
  const std::vector<Element> elements = FrameElements();
  const std::string bytes = Flatten(Encode(elements, 0));
  const std::shared_ptr<TensorBuffer> region = Placed(bytes, 0);
  const long before = region.use_count();
  {
    absl::StatusOr<ElementsResponse> decoded = DecodePlaced(region, 0, bytes.size(), region);
    REQUIRE(decoded.ok());
    REQUIRE(decoded->elements.size() == 100);
    for (size_t i = 0; i < elements.size(); ++i) {
      INFO("element " << i);
      CHECK(decoded->elements[i] == elements[i]);
      // The 8 KiB image is a view of the region, aligned; the small ids
      // and the string were copied out.
      CHECK(Within(decoded->elements[i].components[1], region, bytes.size()));
      CHECK(reinterpret_cast<uintptr_t>(decoded->elements[i].components[1].raw_data()) % kBufferAlignment ==
            0);
      CHECK_FALSE(Within(decoded->elements[i].components[0], region, bytes.size()));
    }
    // Each view keeps the region.
    CHECK(region.use_count() == before + 100);
  }
  CHECK(region.use_count() == before);

  // Not aligned there, or not said to stay: copies, and the region is not kept.
  const std::shared_ptr<TensorBuffer> shifted = Placed(bytes, 8);
  absl::StatusOr<ElementsResponse> copied = DecodePlaced(shifted, 8, bytes.size(), shifted);
  REQUIRE(copied.ok());
  absl::StatusOr<ElementsResponse> unasked = DecodePlaced(region, 0, bytes.size(), nullptr);
  REQUIRE(unasked.ok());
  for (size_t i = 0; i < elements.size(); ++i) {
    CHECK(copied->elements[i] == elements[i]);
    CHECK_FALSE(Within(copied->elements[i].components[1], shifted, bytes.size() + 8));
    CHECK_FALSE(Within(unasked->elements[i].components[1], region, bytes.size()));
  }
  CHECK(shifted.use_count() == 1);
  CHECK(region.use_count() == before);
}

TEST_CASE("element_frame: the first large tensor lies 64-byte aligned in its response, whatever the head",
          "[wire][frame]") {
  // Heads of every length modulo 64 (the string), and frames whose length
  // takes 2, 3 and 4 varint bytes, so that the padding also moves the length.
  for (const int64_t large : {int64_t{4096}, int64_t{16320}, int64_t{16384}, int64_t{2097088}}) {
    for (size_t label = 0; label < 70; label += 3) {
      INFO(large << " bytes, a label of " << label);
      Tensor image(DType::kUInt8, {large});
      image.mutable_data<uint8_t>()[large - 1] = 7;
      const std::vector<Element> elements = {
          Element({Tensor::StringScalar(std::string(label, 'x')), image, Tensor::Scalar<int64_t>(5)})};
      const std::string bytes = Flatten(Encode(elements, 0));
      const std::shared_ptr<TensorBuffer> region = Placed(bytes, 0);
      absl::StatusOr<ElementsResponse> decoded = DecodePlaced(region, 0, bytes.size(), region);
      REQUIRE(decoded.ok());
      REQUIRE(decoded->elements.size() == 1);
      CHECK(decoded->elements[0] == elements[0]);
      CHECK(Within(decoded->elements[0].components[1], region, bytes.size()));
    }
  }
}

}  // namespace sluice
