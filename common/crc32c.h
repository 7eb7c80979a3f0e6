// CRC-32C (Castagnoli), as used by TFRecord framing, plus TFRecord's mask.
//
// Written here because Debian 12 ships no maintained C++ CRC-32C library
// (bookworm has no libcrc32c-dev, only python3-crc32c):
// google/crc32c is not packaged, and abseil gained absl/crc only after the
// 20220623 release that Debian 12 carries. See docs/design.md.
#ifndef SLUICE_COMMON_CRC32C_H_
#define SLUICE_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice::crc32c {

// Extends `crc` (0 to start) with `data`: with SSE 4.2's crc32
// instruction where the CPU has it, else with tables.
uint32_t Extend(uint32_t crc, const void* data, size_t size);
inline uint32_t Value(std::string_view data) { return Extend(0, data.data(), data.size()); }

// TFRecord stores CRCs masked, so that a CRC of data containing CRCs is
// not degenerate.
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t Unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

namespace internal {
// The tables alone, whatever the CPU: for the tests, which compare both.
uint32_t ExtendWithTables(uint32_t crc, const void* data, size_t size);
}  // namespace internal

}  // namespace sluice::crc32c

#endif  // SLUICE_COMMON_CRC32C_H_
