#include "pipeline/image/pixel_ops.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "pipeline/image/hwy_test_util.h"

namespace sluice::image {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = uint8_t(rng());
  return bytes;
}

uint32_t Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Reference conversions, written the textbook way (integer rounding of the
// dropped bits), unlike the kernels' float tricks.
uint16_t ReferenceHalf(float f) {
  const uint32_t x = Bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t magnitude = x & 0x7FFFFFFF;
  if (magnitude > 0x7F800000) return sign | 0x7E00;   // NaN
  if (magnitude >= 0x477FF000) return sign | 0x7C00;  // >= 65520 rounds to infinity
  if (magnitude < 0x38800000) {                       // below 2^-14: subnormal (or zero)
    return sign | uint16_t(std::nearbyint(double(std::fabs(f)) * 16777216.0));  // units of 2^-24
  }
  uint32_t half = ((((magnitude >> 23) - 127 + 15)) << 10) | ((magnitude & 0x7FFFFF) >> 13);
  const uint32_t dropped = magnitude & 0x1FFF;
  if (dropped > 0x1000 || (dropped == 0x1000 && (half & 1))) ++half;  // carries into the exponent correctly
  return sign | uint16_t(half);
}

uint16_t ReferenceBFloat16(float f) {
  const uint32_t x = Bits(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return uint16_t((x >> 16) | 0x40);
  uint32_t upper = x >> 16;
  const uint32_t dropped = x & 0xFFFF;
  if (dropped > 0x8000 || (dropped == 0x8000 && (upper & 1))) ++upper;
  return uint16_t(upper);
}

// ---------------------------------------------------------------- crop and flips

TEST_CASE("Crop copies the window", "[image]") {
  const int h = 9, w = 11, c = 3;
  const std::vector<uint8_t> in = RandomBytes(h * w * c, 1);
  const CropWindow window{2, 3, 5, 7};
  std::vector<uint8_t> out(window.height * window.width * c);
  Crop({in.data(), h, w, c}, window, {out.data(), window.height, window.width, c});
  for (int y = 0; y < window.height; ++y) {
    for (int x = 0; x < window.width * c; ++x) {
      CHECK(out[y * window.width * c + x] == in[(y + window.top) * w * c + window.left * c + x]);
    }
  }
}

std::vector<uint8_t> ReferenceFlipLeftRight(const std::vector<uint8_t>& in, int h, int w, int c) {
  std::vector<uint8_t> out(in.size());
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) std::memcpy(&out[(y * w + x) * c], &in[(y * w + (w - 1 - x)) * c], c);
  }
  return out;
}

TEST_CASE("FlipLeftRight reverses pixels, in place and not", "[image]") {
  // Widths around multiples of every vector size (16, 32, 64 bytes), so
  // both the vector loop and the scalar middle run.
  const int widths[] = {1, 2, 3, 5, 15, 16, 17, 31, 33, 37, 63, 64, 65, 101, 128, 203, 257};
  ForEachHwyTarget([&](const char* target) {
    for (int c = 1; c <= 4; ++c) {
      for (int w : widths) {
        const int h = 3;
        INFO(target << " channels " << c << " width " << w);
        const std::vector<uint8_t> in = RandomBytes(h * w * c, w * 10 + c);
        const std::vector<uint8_t> expected = ReferenceFlipLeftRight(in, h, w, c);
        std::vector<uint8_t> out(in.size(), 0);
        FlipLeftRight({in.data(), h, w, c}, {out.data(), h, w, c});
        CHECK(out == expected);
        std::vector<uint8_t> same = in;
        FlipLeftRight({same.data(), h, w, c}, {same.data(), h, w, c});
        CHECK(same == expected);
        FlipLeftRight({same.data(), h, w, c}, {same.data(), h, w, c});
        CHECK(same == in);
      }
    }
  });
}

TEST_CASE("FlipUpDown reverses rows, in place and not", "[image]") {
  for (int h : {1, 2, 5, 6}) {
    for (int c : {1, 3}) {
      const int w = 7;
      const size_t row = w * c;
      const std::vector<uint8_t> in = RandomBytes(h * row, h * 10 + c);
      std::vector<uint8_t> expected(in.size());
      for (int y = 0; y < h; ++y) std::memcpy(&expected[y * row], &in[(h - 1 - y) * row], row);
      std::vector<uint8_t> out(in.size());
      FlipUpDown({in.data(), h, w, c}, {out.data(), h, w, c});
      CHECK(out == expected);
      std::vector<uint8_t> same = in;
      FlipUpDown({same.data(), h, w, c}, {same.data(), h, w, c});
      CHECK(same == expected);
    }
  }
}

// ---------------------------------------------------------------- normalize

struct NormalizeCase {
  int height;
  int width;
  int channels;
};

// Sizes whose pixel counts are and are not multiples of the vector widths,
// and some smaller than one vector (the scalar path).
const NormalizeCase kCases[] = {{1, 1, 3}, {2, 3, 3},   {16, 16, 3}, {37, 11, 3}, {5, 101, 1},
                                {9, 7, 2}, {13, 13, 4}, {1, 3, 1},   {24, 24, 3}};

TEST_CASE("Normalize float32 matches (x / 255 - mean) / std, HWC and CHW", "[image]") {
  ForEachHwyTarget([](const char* target) {
    for (const NormalizeCase& nc : kCases) {
      const int count = 2;
      const size_t pixels = size_t(nc.height) * nc.width;
      const std::vector<uint8_t> in = RandomBytes(count * pixels * nc.channels, nc.width);
      const std::vector<float> mean = std::vector<float>{0.485f, 0.456f, 0.406f, 0.5f};
      const std::vector<float> stddev = std::vector<float>{0.229f, 0.224f, 0.225f, 0.25f};
      const std::vector<float> m(mean.begin(), mean.begin() + nc.channels);
      const std::vector<float> s(stddev.begin(), stddev.begin() + nc.channels);
      for (Layout layout : {Layout::kHWC, Layout::kCHW}) {
        INFO(target << " " << nc.height << "x" << nc.width << "x" << nc.channels << " CHW "
                    << (layout == Layout::kCHW));
        std::vector<float> out(in.size(), -100.0f);
        Normalize({in.data(), nc.height, nc.width, nc.channels}, count, m, s, FloatType::kFloat32, layout,
                  out.data());
        int wrong = 0;
        for (int i = 0; i < count; ++i) {
          for (size_t p = 0; p < pixels; ++p) {
            for (int c = 0; c < nc.channels; ++c) {
              const size_t in_index = (i * pixels + p) * nc.channels + c;
              const size_t out_index =
                  layout == Layout::kHWC ? in_index : i * pixels * nc.channels + c * pixels + p;
              const double expected = (in[in_index] / 255.0 - m[c]) / s[c];
              if (std::fabs(out[out_index] - expected) > 1e-6 * std::max(1.0, std::fabs(expected))) ++wrong;
            }
          }
        }
        CHECK(wrong == 0);
      }
    }
  });
}

TEST_CASE("Normalize float16 and bfloat16 round float32 to nearest even, bit for bit", "[image]") {
  // Scales from tiny (float16 subnormals) to huge (float16 infinity) so the
  // conversions see every kind of value; the float32 output of the same
  // call, converted by the reference, is what each must equal.
  std::mt19937 rng(9);
  ForEachHwyTarget([&](const char* target) {
    for (const NormalizeCase& nc : kCases) {
      for (int trial = 0; trial < 12; ++trial) {
        const int count = 2;
        const size_t values = count * size_t(nc.height) * nc.width * nc.channels;
        const std::vector<uint8_t> in = RandomBytes(values, rng());
        std::vector<float> mean, stddev;
        for (int c = 0; c < nc.channels; ++c) {
          mean.push_back(std::uniform_real_distribution<float>(-2, 2)(rng));
          stddev.push_back(std::pow(10.0f, std::uniform_real_distribution<float>(-8, 8)(rng)));
        }
        for (Layout layout : {Layout::kHWC, Layout::kCHW}) {
          INFO(target << " " << nc.height << "x" << nc.width << "x" << nc.channels << " trial " << trial);
          const ImageView view{in.data(), nc.height, nc.width, nc.channels};
          std::vector<float> f32(values);
          std::vector<uint16_t> f16(values), bf16(values);
          Normalize(view, count, mean, stddev, FloatType::kFloat32, layout, f32.data());
          Normalize(view, count, mean, stddev, FloatType::kFloat16, layout, f16.data());
          Normalize(view, count, mean, stddev, FloatType::kBFloat16, layout, bf16.data());
          int wrong = 0;
          for (size_t i = 0; i < values; ++i) {
            wrong += f16[i] != ReferenceHalf(f32[i]);
            wrong += bf16[i] != ReferenceBFloat16(f32[i]);
          }
          CHECK(wrong == 0);
        }
      }
    }
  });
}

// Normalizes an all-zero image with mean -value and std 1, which outputs
// exactly `value`; returns what one element came out as.
template <typename T>
T Convert(float value, FloatType type, int pixels) {
  std::vector<uint8_t> zeros(pixels, 0);
  std::vector<T> out(pixels);
  Normalize({zeros.data(), 1, pixels, 1}, 1, {-value}, {1.0f}, type, Layout::kHWC, out.data());
  return out[pixels - 1];
}

TEST_CASE("Normalize float16 and bfloat16 specific values", "[image]") {
  ForEachHwyTarget([](const char* target) {
    for (int pixels : {1, 70}) {  // scalar path, vector path
      INFO(target << " pixels " << pixels);
      auto half = [&](float v) { return Convert<uint16_t>(v, FloatType::kFloat16, pixels); };
      auto bfloat = [&](float v) { return Convert<uint16_t>(v, FloatType::kBFloat16, pixels); };
      CHECK(half(1.0f) == 0x3C00);
      CHECK(half(-2.0f) == 0xC000);
      CHECK(half(0.0f) == 0x0000);
      CHECK(half(65504.0f) == 0x7BFF);
      CHECK(half(65519.99f) == 0x7BFF);
      CHECK(half(65520.0f) == 0x7C00);  // the halfway point rounds to even: infinity
      CHECK(half(-1e30f) == 0xFC00);
      CHECK(half(std::numeric_limits<float>::infinity()) == 0x7C00);
      CHECK(half(std::ldexp(1.0f, -24)) == 0x0001);     // smallest subnormal
      CHECK(half(std::ldexp(1.0f, -25)) == 0x0000);     // half of it: ties to even (zero)
      CHECK(half(std::ldexp(3.0f, -25)) == 0x0002);     // 1.5 units: ties to even (2)
      CHECK(half(std::ldexp(1023.0f, -24)) == 0x03FF);  // largest subnormal
      CHECK(half(std::ldexp(2047.0f, -25)) == 0x0400);  // rounds up into the normals
      CHECK(half(FromBits(0x3F801000)) == 0x3C00);      // 1 + 2^-11: tie, stays even
      CHECK(half(FromBits(0x3F803000)) == 0x3C02);      // 1 + 3 * 2^-11: tie, up to even
      CHECK((half(std::numeric_limits<float>::quiet_NaN()) & 0x7FFF) == 0x7E00);
      CHECK(bfloat(1.0f) == 0x3F80);
      CHECK(bfloat(-1.0f) == 0xBF80);
      CHECK(bfloat(FromBits(0x3F808000)) == 0x3F80);  // tie, stays even
      CHECK(bfloat(FromBits(0x3F818000)) == 0x3F82);  // tie, up to even
      CHECK(bfloat(FromBits(0x3F808001)) == 0x3F81);  // above the tie
      CHECK(bfloat(FLT_MAX) == 0x7F80);               // rounds to infinity
      const uint16_t nan = bfloat(std::numeric_limits<float>::quiet_NaN());
      CHECK((nan & 0x7F80) == 0x7F80);
      CHECK((nan & 0x007F) != 0);
    }
  });
}

TEST_CASE("The reference float16 conversion agrees with the hardware's", "[image]") {
  // Checks the checker: _Float16 (GCC 12, x86-64) converts with correct
  // rounding, so the textbook reference above must agree everywhere.
#if defined(__FLT16_MAX__)
  std::mt19937 rng(4);
  for (int i = 0; i < 1000000; ++i) {
    const float f = FromBits(uint32_t(rng()));
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    if (bits != ReferenceHalf(f)) FAIL("mismatch for float bits " << Bits(f));
  }
#endif
}

}  // namespace
}  // namespace sluice::image
