// The flat frame's layout, shared by its encoder (element_frame.cc) and
// decoder (element_frame_decode.cc). Internal to service/.
#ifndef SLUICE_SERVICE_ELEMENT_FRAME_FORMAT_H_
#define SLUICE_SERVICE_ELEMENT_FRAME_FORMAT_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sluice::frame_format {

static_assert(std::endian::native == std::endian::little,
              "frames are little-endian, written as the host's integers");

inline constexpr uint32_t kMagic = 0x31464C53;  // "SLF1"
// magic u32, elements u32, spec id u64, components u32, spec bytes u32
// (0: left out), head bytes u64, frame bytes u64.
inline constexpr size_t kHeaderBytes = 40;
// Per component: dtype u8, rank u8, zero u16, name length u32.
inline constexpr size_t kSpecComponentBytes = 8;
inline constexpr size_t kSmallAlignment = 16;
// Bounds what a reader reserves for a frame of empty elements.
inline constexpr uint64_t kMaxFrameElements = uint64_t{1} << 20;
inline constexpr int kMaxRank = 255;

inline size_t Align(size_t n, size_t alignment) { return (n + alignment - 1) & ~(alignment - 1); }

template <typename T>
inline void Put(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof value);
}
template <typename T>
inline T Get(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

// FNV-1a: stable across processes and builds, which the id must be.
inline uint64_t SpecId(const uint8_t* bytes, size_t size) {
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash == 0 ? 1 : hash;
}

}  // namespace sluice::frame_format

#endif  // SLUICE_SERVICE_ELEMENT_FRAME_FORMAT_H_
