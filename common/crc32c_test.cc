#include "common/crc32c.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

namespace sluice::crc32c {
namespace {

TEST_CASE("crc32c: the published check values", "[crc32c]") {
  // The CRC catalogue's check value for CRC-32C.
  CHECK(Value("123456789") == 0xe3069283u);
  CHECK(Value("") == 0u);
  // RFC 3720 (iSCSI), appendix B.4: 32 bytes of zeros, of 0xff, ascending
  // and descending.
  CHECK(Value(std::string(32, '\0')) == 0x8a9136aau);
  CHECK(Value(std::string(32, '\xff')) == 0x62a8ab43u);
  std::string ascending(32, '\0');
  std::string descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<char>(i);
    descending[i] = static_cast<char>(31 - i);
  }
  CHECK(Value(ascending) == 0x46dd794eu);
  CHECK(Value(descending) == 0x113fdb5cu);
}

TEST_CASE("crc32c: the instruction and the tables agree at every length and alignment", "[crc32c]") {
  std::mt19937 random(7);
  std::string data(4096 + 16, '\0');
  for (char& byte : data) byte = static_cast<char>(random());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t length : {0, 1, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096}) {
      const char* start = data.data() + offset;
      INFO("offset " << offset << ", length " << length);
      CHECK(Extend(0, start, length) == internal::ExtendWithTables(0, start, length));
      // Extending in two pieces is the same as in one.
      const size_t half = length / 3;
      CHECK(Extend(Extend(0, start, half), start + half, length - half) == Extend(0, start, length));
    }
  }
  CHECK(Extend(0x12345678u, data.data(), 100) == internal::ExtendWithTables(0x12345678u, data.data(), 100));
}

}  // namespace
}  // namespace sluice::crc32c
