// 16-bit floating point storage types. Arithmetic goes through float; these
// only hold the bit pattern and convert with round-to-nearest-even.
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_HALF_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_HALF_H_

#include <bit>
#include <cstdint>

namespace sluice {

// IEEE 754 binary16.
struct Float16 {
  uint16_t bits = 0;

  Float16() = default;
  explicit Float16(float value) : bits(FromFloat(value)) {}
  explicit operator float() const { return ToFloat(bits); }

  static uint16_t FromFloat(float value) {
    const uint32_t f = std::bit_cast<uint32_t>(value);
    const uint32_t sign = (f >> 16) & 0x8000u;
    const uint32_t abs = f & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or nan
      return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow
    if (abs < 0x38800000u) {                                               // subnormal or zero in half
      if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
      const uint32_t exponent = abs >> 23;
      const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
      const uint32_t shift = 126 - exponent;  // 14..24
      uint32_t half = mantissa >> shift;
      const uint32_t rest = mantissa & ((1u << shift) - 1);
      const uint32_t halfway = 1u << (shift - 1);
      if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
      return static_cast<uint16_t>(sign | half);
    }
    uint32_t rounded = abs - 0x38000000u;  // rebias exponent 127 -> 15
    rounded += 0xfffu + ((rounded >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }

  static float ToFloat(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
      if (mantissa == 0) return std::bit_cast<float>(sign);
      // Subnormal: value = mantissa * 2^-24.
      const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
      return sign ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
};

// bfloat16: the top half of a float32.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float value) : bits(FromFloat(value)) {}
  explicit operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

  static uint16_t FromFloat(float value) {
    const uint32_t f = std::bit_cast<uint32_t>(value);
    if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // nan
    return static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
  }
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_HALF_H_
