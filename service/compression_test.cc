#include "service/compression.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"

namespace sluice {
namespace {

// A zstd frame header alone (single segment, an 8-byte content size) that
// declares `bytes` decompressed: all a bomb's size check reads.
std::string ZstdHeader(uint64_t bytes) {
  std::string header("\x28\xb5\x2f\xfd\xe0", 5);
  for (int i = 0; i < 8; ++i) header += static_cast<char>(bytes >> (8 * i));
  return header;
}

TEST_CASE("compression: every codec round-trips", "[compression]") {
  std::string input;
  for (int i = 0; i < 100000; ++i) input += static_cast<char>('a' + i % 7);
  for (proto::WireCompression codec :
       {proto::COMPRESSION_NONE, proto::COMPRESSION_SNAPPY, proto::COMPRESSION_ZSTD}) {
    INFO(WireCompressionName(codec));
    std::string compressed;
    REQUIRE(Compress(codec, input, &compressed).ok());
    if (codec != proto::COMPRESSION_NONE) CHECK(compressed.size() < input.size() / 10);
    std::string output;
    REQUIRE(Decompress(codec, compressed, &output).ok());
    CHECK(output == input);
  }
  std::string empty;
  REQUIRE(Compress(proto::COMPRESSION_ZSTD, "", &empty).ok());
  std::string back = "x";
  REQUIRE(Decompress(proto::COMPRESSION_ZSTD, empty, &back).ok());
  CHECK(back.empty());
}

TEST_CASE("compression: corrupt input is DataLoss", "[compression]") {
  std::string output;
  absl::Status snappy = Decompress(proto::COMPRESSION_SNAPPY, "\xff\xff\xff\xff\xff garbage", &output);
  CHECK(snappy.code() == absl::StatusCode::kDataLoss);
  CHECK(snappy.message() == "corrupt snappy data in an element");
  absl::Status zstd = Decompress(proto::COMPRESSION_ZSTD, "not a zstd frame", &output);
  CHECK(zstd.code() == absl::StatusCode::kDataLoss);
  CHECK(zstd.message() == "corrupt zstd data in an element");
}

TEST_CASE("compression: a size past the limit is refused before decompressing", "[compression]") {
  const std::string input(1000, 'x');
  for (proto::WireCompression codec : {proto::COMPRESSION_SNAPPY, proto::COMPRESSION_ZSTD}) {
    INFO(WireCompressionName(codec));
    std::string compressed;
    REQUIRE(Compress(codec, input, &compressed).ok());
    std::string output;
    CHECK(Decompress(codec, compressed, &output, 1000).ok());
    CHECK(output == input);
    output.clear();
    CHECK(Decompress(codec, compressed, &output, 999) ==
          absl::DataLossError(
              absl::StrCat(WireCompressionName(codec),
                           " data declares 1000 bytes decompressed, more than the 999 allowed")));
    CHECK(output.empty());
  }
  // A few bytes may declare a huge size: zstd's frame header with an 8-byte
  // content size of 2^40, snappy's length varint of 2^31.
  std::string output;
  const std::string zstd_bomb = std::string("\x28\xb5\x2f\xfd\xe0", 5) + std::string("\0\0\0\0\0\x01\0\0", 8);
  CHECK(Decompress(proto::COMPRESSION_ZSTD, zstd_bomb, &output) ==
        absl::DataLossError(
            "zstd data declares 1099511627776 bytes decompressed, more than the 268435456 allowed"));
  CHECK(Decompress(proto::COMPRESSION_SNAPPY, std::string("\x80\x80\x80\x80\x08", 5), &output) ==
        absl::DataLossError(
            "snappy data declares 2147483648 bytes decompressed, more than the 268435456 allowed"));
  CHECK(output.empty());
}

TEST_CASE("compression: DecompressedSize reads the size from the header alone", "[compression]") {
  const std::string input(1000, 'x');
  for (proto::WireCompression codec :
       {proto::COMPRESSION_NONE, proto::COMPRESSION_SNAPPY, proto::COMPRESSION_ZSTD}) {
    INFO(WireCompressionName(codec));
    std::string compressed;
    REQUIRE(Compress(codec, input, &compressed).ok());
    CHECK(*DecompressedSize(codec, compressed) == 1000);
  }
  CHECK(*DecompressedSize(proto::COMPRESSION_ZSTD, ZstdHeader(uint64_t{1} << 40)) == (uint64_t{1} << 40));
  CHECK(*DecompressedSize(proto::COMPRESSION_SNAPPY, std::string("\x80\x80\x80\x80\x08", 5)) ==
        (uint64_t{1} << 31));
  CHECK(DecompressedSize(proto::COMPRESSION_ZSTD, "not a zstd frame").status() ==
        absl::DataLossError("corrupt zstd data in an element"));
  CHECK(DecompressedSize(proto::COMPRESSION_SNAPPY, "\xff\xff\xff\xff\xff garbage").status() ==
        absl::DataLossError("corrupt snappy data in an element"));
}

// A response of `count` copies of `compressed`.
proto::GetElementsResponse Response(proto::WireCompression codec, const std::string& compressed, int count) {
  proto::GetElementsResponse response;
  response.set_compression(codec);
  for (int i = 0; i < count; ++i) response.add_compressed_elements(compressed);
  return response;
}

TEST_CASE("compression: a response's compressed elements are bounded together, before any is decompressed",
          "[compression]") {
  const Element element = Element::Of(Tensor::FromVector<int64_t>(std::vector<int64_t>(100, 7)));
  proto::ElementProto encoded;
  ElementToProto(element, &encoded);
  const std::string serialized = encoded.SerializeAsString();
  for (proto::WireCompression codec : {proto::COMPRESSION_SNAPPY, proto::COMPRESSION_ZSTD}) {
    INFO(WireCompressionName(codec));
    std::string compressed;
    REQUIRE(Compress(codec, serialized, &compressed).ok());
    const proto::GetElementsResponse response = Response(codec, compressed, 3);
    const size_t total = 3 * serialized.size();
    std::vector<Element> elements;
    REQUIRE(DecodeElements(response, &elements, total).ok());
    CHECK(elements == std::vector<Element>(3, element));
    // One byte less: refused whole, though each element alone fits.
    elements.clear();
    CHECK(DecodeElements(response, &elements, total - 1) ==
          absl::DataLossError(absl::StrCat("GetElements response: its 3 compressed elements declare ", total,
                                           " bytes decompressed, past the ", total - 1, " they may have")));
    CHECK(elements.empty());
  }
}

TEST_CASE("compression: zstd and snappy bombs are refused by their declared sizes", "[compression]") {
  // 64 MiB of zeros compress to a few KiB; five declare 320 MiB, past the
  // 256 MiB of a message. Nothing is decompressed (no element comes out).
  std::string bomb;
  REQUIRE(Compress(proto::COMPRESSION_ZSTD, std::string(size_t{64} << 20, '\0'), &bomb).ok());
  CHECK(bomb.size() < 16384);
  std::vector<Element> elements;
  CHECK(DecodeElements(Response(proto::COMPRESSION_ZSTD, bomb, 5), &elements) ==
        absl::DataLossError("GetElements response: its 5 compressed elements declare 335544320 bytes "
                            "decompressed, past the 268435456 they may have"));
  CHECK(elements.empty());
  // Four are exactly the limit: the first is decompressed, and its zeros
  // are no element.
  CHECK(DecodeElements(Response(proto::COMPRESSION_ZSTD, bomb, 4), &elements) ==
        absl::DataLossError("a decompressed element does not parse"));
  // Headers alone: three snappy lengths of 128 MiB; two zstd sizes of 2^63
  // whose sum would wrap (it is counted as the largest size instead).
  CHECK(
      DecodeElements(Response(proto::COMPRESSION_SNAPPY, std::string("\x80\x80\x80\x40", 4), 3), &elements) ==
      absl::DataLossError("GetElements response: its 3 compressed elements declare 402653184 bytes "
                          "decompressed, past the 268435456 they may have"));
  CHECK(DecodeElements(Response(proto::COMPRESSION_ZSTD, ZstdHeader(uint64_t{1} << 63), 2), &elements) ==
        absl::DataLossError("GetElements response: its 2 compressed elements declare 18446744073709551615 "
                            "bytes decompressed, past the 268435456 they may have"));
  CHECK(elements.empty());
}

TEST_CASE("compression: names parse in any case, unknown ones are refused", "[compression]") {
  CHECK(*ParseWireCompression("") == proto::COMPRESSION_NONE);
  CHECK(*ParseWireCompression("NONE") == proto::COMPRESSION_NONE);
  CHECK(*ParseWireCompression("Snappy") == proto::COMPRESSION_SNAPPY);
  CHECK(*ParseWireCompression("zstd") == proto::COMPRESSION_ZSTD);
  absl::StatusOr<proto::WireCompression> bad = ParseWireCompression("lz4");
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message() == "unknown compression 'lz4' (valid: none, snappy, zstd)");
}

}  // namespace
}  // namespace sluice
