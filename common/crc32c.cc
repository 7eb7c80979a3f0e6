#include "common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

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

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t size) {
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

#if defined(__x86_64__)
// SSE 4.2's crc32 instruction computes exactly this polynomial, 8 bytes per
// instruction: about 5x the tables (bench/README.md, object_storage), where
// the tables were a quarter of a TFRecord reader's time.
__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  while (size > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --size;
  }
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}

#endif

using ExtendFunction = uint32_t (*)(uint32_t, const void*, size_t);

ExtendFunction ChooseExtend() {
#if defined(__x86_64__)
  __builtin_cpu_init();  // may run before libgcc's own initialiser
  if (__builtin_cpu_supports("sse4.2")) return ExtendSse42;
#endif
  return ExtendPortable;
}

}  // namespace

uint32_t Extend(uint32_t crc, const void* data, size_t size) {
  // Chosen on first use: a static initialiser elsewhere may call it first.
  static const ExtendFunction extend = ChooseExtend();
  return extend(crc, data, size);
}

namespace internal {
uint32_t ExtendWithTables(uint32_t crc, const void* data, size_t size) {
  return ExtendPortable(crc, data, size);
}
}  // namespace internal

}  // namespace sluice::crc32c
