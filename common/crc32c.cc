#include "common/crc32c.h"

#include <array>

namespace sluice::crc32c {
namespace {

// Slicing-by-4 tables for the reflected polynomial 0x82f63b78.
struct Tables {
  std::array<std::array<uint32_t, 256>, 4> t{};
  constexpr Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
      t[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 4; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};

constexpr Tables kTables;

}  // namespace

uint32_t Extend(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (size >= 4) {
    c ^= static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
    c = kTables.t[3][c & 0xff] ^ kTables.t[2][(c >> 8) & 0xff] ^ kTables.t[1][(c >> 16) & 0xff] ^
        kTables.t[0][c >> 24];
    p += 4;
    size -= 4;
  }
  while (size-- > 0) c = (c >> 8) ^ kTables.t[0][(c ^ *p++) & 0xff];
  return ~c;
}

}  // namespace sluice::crc32c
