#include "service/compression.h"

#include <catch2/catch.hpp>

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
