#include "service/compression.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

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
