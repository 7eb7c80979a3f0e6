// Crop and FlipUpDown move whole rows (memcpy). FlipLeftRight and
// Normalize are SIMD (Highway, dynamic dispatch): flips reverse whole
// vectors of pixels from both ends of a row at once, so they work in place;
// Normalize converts, scales and rounds a vector at a time, and for CHW
// de-interleaves with Highway's LoadInterleaved2/3/4.
//
// FlipLeftRight reverses each row independently, so a batch of N
// same-sized images can be flipped as one image of height N * H.
#include "pipeline/image/pixel_ops.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "pipeline/image/pixel_ops.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#ifndef SLUICE_PIPELINE_IMAGE_PIXEL_OPS_CC_SHARED_
#define SLUICE_PIPELINE_IMAGE_PIXEL_OPS_CC_SHARED_
namespace sluice::image::pixel_ops_internal {

// float32 to float16, round to nearest even, with overflow to infinity,
// subnormals and NaN handled (Maratyszcza's FP16 method: the float unit's
// own rounding does the work, so it vectorizes without branches).
// Multiplying by 2^112 overflows to infinity exactly when the result
// rounds to infinity; adding a power of two aligned to the f16 exponent
// rounds the mantissa to 10 bits.
inline uint32_t FloatToHalfBits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  const uint32_t shifted = w + w;  // sign dropped
  const uint32_t sign = w & 0x80000000u;
  float base = (std::abs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t bias = std::max(shifted & 0xFF000000u, 0x71000000u);
  const uint32_t aligner_bits = (bias >> 1) + 0x07800000u;
  float aligner;
  std::memcpy(&aligner, &aligner_bits, 4);
  base = aligner + base;
  uint32_t bits;
  std::memcpy(&bits, &base, 4);
  const uint32_t magnitude = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
  return (sign >> 16) | (shifted > 0xFF000000u ? 0x7E00u : magnitude);
}

// float32 to bfloat16, round to nearest even; NaN stays a (quiet) NaN.
inline uint32_t FloatToBFloat16Bits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) return (w >> 16) | 0x40u;
  return (w + 0x7FFFu + ((w >> 16) & 1u)) >> 16;
}

}  // namespace sluice::image::pixel_ops_internal
#endif  // SLUICE_PIPELINE_IMAGE_PIXEL_OPS_CC_SHARED_

HWY_BEFORE_NAMESPACE();
namespace sluice::image::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------- flips

#if HWY_TARGET != HWY_SCALAR
using D8 = hn::ScalableTag<uint8_t>;

// Reverses the order of `channels`-byte pixels within a vector.
template <int kChannels>
HWY_INLINE hn::Vec<D8> ReversePixels(D8 d8, hn::Vec<D8> v) {
  if constexpr (kChannels == 4) {
    const hn::Repartition<uint32_t, D8> d32;
    return hn::BitCast(d8, hn::Reverse(d32, hn::BitCast(d32, v)));
  } else {
    // Highway 1.0 reverses 16-bit lanes but not bytes: reverse byte pairs,
    // then (for single bytes) swap the two bytes of each pair.
    const hn::Repartition<uint16_t, D8> d16;
    hn::Vec<decltype(d16)> pairs = hn::Reverse(d16, hn::BitCast(d16, v));
    if constexpr (kChannels == 1) pairs = hn::Or(hn::ShiftLeft<8>(pairs), hn::ShiftRight<8>(pairs));
    return hn::BitCast(d8, pairs);
  }
}
#endif

template <int kChannels>
void FlipRow(const uint8_t* in, uint8_t* out, size_t width) {
  size_t low = 0;  // pixels [0, low) and [high, width) are done
  size_t high = width;
#if HWY_TARGET != HWY_SCALAR
  const D8 d8;
  if constexpr (kChannels == 3) {
    const size_t step = hn::Lanes(d8);  // pixels per LoadInterleaved3
    for (; high - low >= 2 * step; low += step, high -= step) {
      hn::Vec<D8> l0, l1, l2, h0, h1, h2;
      hn::LoadInterleaved3(d8, in + low * 3, l0, l1, l2);
      hn::LoadInterleaved3(d8, in + (high - step) * 3, h0, h1, h2);
      hn::StoreInterleaved3(ReversePixels<1>(d8, h0), ReversePixels<1>(d8, h1), ReversePixels<1>(d8, h2), d8,
                            out + low * 3);
      hn::StoreInterleaved3(ReversePixels<1>(d8, l0), ReversePixels<1>(d8, l1), ReversePixels<1>(d8, l2), d8,
                            out + (high - step) * 3);
    }
  } else {
    const size_t step = hn::Lanes(d8) / kChannels;
    for (; high - low >= 2 * step; low += step, high -= step) {
      // Both ends are loaded before either is stored: safe in place.
      const auto low_pixels = hn::LoadU(d8, in + low * kChannels);
      const auto high_pixels = hn::LoadU(d8, in + (high - step) * kChannels);
      hn::StoreU(ReversePixels<kChannels>(d8, high_pixels), d8, out + low * kChannels);
      hn::StoreU(ReversePixels<kChannels>(d8, low_pixels), d8, out + (high - step) * kChannels);
    }
  }
#endif
  // The middle, fewer than two vectors: pixel by pixel from both ends.
  for (; low + 1 < high; ++low, --high) {
    uint8_t left[kChannels], right[kChannels];
    std::memcpy(left, in + low * kChannels, kChannels);
    std::memcpy(right, in + (high - 1) * kChannels, kChannels);
    std::memcpy(out + low * kChannels, right, kChannels);
    std::memcpy(out + (high - 1) * kChannels, left, kChannels);
  }
  if (low + 1 == high) std::memmove(out + low * kChannels, in + low * kChannels, kChannels);
}

void FlipRows(const uint8_t* in, uint8_t* out, int height, int width, int channels) {
  const size_t row = static_cast<size_t>(width) * channels;
  for (int y = 0; y < height; ++y) {
    const uint8_t* in_row = in + y * row;
    uint8_t* out_row = out + y * row;
    switch (channels) {
      case 1:
        FlipRow<1>(in_row, out_row, width);
        break;
      case 2:
        FlipRow<2>(in_row, out_row, width);
        break;
      case 3:
        FlipRow<3>(in_row, out_row, width);
        break;
      default:
        FlipRow<4>(in_row, out_row, width);
        break;
    }
  }
}

// ---------------------------------------------------------------- normalize

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;

HWY_INLINE hn::Vec<DU> HalfBits(DF df, hn::Vec<DF> f) {  // FloatToHalfBits, a vector at a time
  const DU du;
  const auto w = hn::BitCast(du, f);
  const auto shifted = hn::Add(w, w);
  const auto sign = hn::And(w, hn::Set(du, 0x80000000u));
  auto base = hn::Mul(hn::Mul(hn::Abs(f), hn::Set(df, 0x1.0p+112f)), hn::Set(df, 0x1.0p-110f));
  const auto bias = hn::Max(hn::And(shifted, hn::Set(du, 0xFF000000u)), hn::Set(du, 0x71000000u));
  base = hn::Add(hn::BitCast(df, hn::Add(hn::ShiftRight<1>(bias), hn::Set(du, 0x07800000u))), base);
  const auto bits = hn::BitCast(du, base);
  const auto magnitude =
      hn::Add(hn::And(hn::ShiftRight<13>(bits), hn::Set(du, 0x7C00u)), hn::And(bits, hn::Set(du, 0x0FFFu)));
  return hn::Or(hn::ShiftRight<16>(sign),
                hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(f)), hn::Set(du, 0x7E00u), magnitude));
}

HWY_INLINE hn::Vec<DU> BFloat16Bits(DF /*df*/, hn::Vec<DF> f) {  // FloatToBFloat16Bits, a vector at a time
  const DU du;
  const auto w = hn::BitCast(du, f);
  const auto odd = hn::And(hn::ShiftRight<16>(w), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(w, hn::Set(du, 0x7FFFu)), odd));
  const auto quiet_nan = hn::Or(hn::ShiftRight<16>(w), hn::Set(du, 0x40u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(f)), quiet_nan, rounded);
}

template <FloatType kType>
HWY_INLINE void StoreValues(DF df, hn::Vec<DF> v, void* out, size_t index) {
  if constexpr (kType == FloatType::kFloat32) {
    hn::StoreU(v, df, static_cast<float*>(out) + index);
  } else {
    const hn::Rebind<uint16_t, DF> d16;
    const hn::Rebind<int32_t, DF> di;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    if constexpr (kType == FloatType::kFloat16) {
      // F16C rounds to nearest even too (and overflows to infinity), in one
      // instruction; it differs from HalfBits only in the payload of NaNs.
      const hn::Rebind<hwy::float16_t, DF> df16;
      hn::StoreU(hn::BitCast(d16, hn::DemoteTo(df16, v)), d16, static_cast<uint16_t*>(out) + index);
      return;
    }
#endif
    const auto bits = kType == FloatType::kFloat16 ? HalfBits(df, v) : BFloat16Bits(df, v);
    // The bits fit in 16 bits, so the saturating narrowing keeps them.
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, static_cast<uint16_t*>(out) + index);
  }
}

template <FloatType kType>
void StoreValue(float v, void* out, size_t index) {
  if constexpr (kType == FloatType::kFloat32) {
    static_cast<float*>(out)[index] = v;
  } else if constexpr (kType == FloatType::kFloat16) {
    static_cast<uint16_t*>(out)[index] = static_cast<uint16_t>(pixel_ops_internal::FloatToHalfBits(v));
  } else {
    static_cast<uint16_t*>(out)[index] = static_cast<uint16_t>(pixel_ops_internal::FloatToBFloat16Bits(v));
  }
}

HWY_INLINE hn::Vec<DF> LoadPixels(DF df, const uint8_t* p) {
  const hn::Rebind<uint8_t, DF> d8;
  const hn::Rebind<int32_t, DF> di;
  return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
}

// HWC in, HWC out: one flat run of `total` values whose channel cycles with
// period `channels`. A block of channels * lanes values starts at channel 0,
// so per-lane scale and bias are `channels` fixed vectors.
template <FloatType kType>
void NormalizeInterleaved(const uint8_t* in, size_t total, int channels, const float* scale,
                          const float* bias, void* out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const size_t block = lanes * channels;
  if (total < block) {
    for (size_t i = 0; i < total; ++i) {
      StoreValue<kType>(in[i] * scale[i % channels] + bias[i % channels], out, i);
    }
    return;
  }
  std::vector<float> lane_scale(block), lane_bias(block);
  for (size_t i = 0; i < block; ++i) {
    lane_scale[i] = scale[i % channels];
    lane_bias[i] = bias[i % channels];
  }
  auto one_block = [&](size_t start) {
    for (int v = 0; v < channels; ++v) {
      const size_t offset = v * lanes;
      const auto value = hn::MulAdd(LoadPixels(df, in + start + offset), hn::LoadU(df, &lane_scale[offset]),
                                    hn::LoadU(df, &lane_bias[offset]));
      StoreValues<kType>(df, value, out, start + offset);
    }
  };
  size_t start = 0;
  for (; start + block <= total; start += block) one_block(start);
  // total and block are multiples of channels, so the overlapping last
  // block still starts at channel 0.
  if (start < total) one_block(total - block);
}

#if HWY_TARGET == HWY_SCALAR
using DBytes = hn::Rebind<uint8_t, DF>;  // one byte, one float
#else
using DBytes = hn::ScalableTag<uint8_t>;  // four times as many bytes as floats
#endif

template <FloatType kType, class DQuarter>
HWY_INLINE void NormalizeBytes(DQuarter /*tag*/, hn::Vec<DQuarter> bytes, float scale, float bias, void* out,
                               size_t index) {
  const DF df;
  const hn::Rebind<int32_t, DF> di;
  StoreValues<kType>(
      df, hn::MulAdd(hn::ConvertTo(df, hn::PromoteTo(di, bytes)), hn::Set(df, scale), hn::Set(df, bias)), out,
      index);
}

// One channel's vector of bytes, widened a quarter at a time to floats.
template <FloatType kType>
HWY_INLINE void NormalizeChannel(hn::Vec<DBytes> bytes, float scale, float bias, void* out, size_t index) {
#if HWY_TARGET == HWY_SCALAR
  NormalizeBytes<kType>(DBytes(), bytes, scale, bias, out, index);
#else
  const hn::Half<DBytes> d_half;
  const hn::Half<decltype(d_half)> d_quarter;  // as many bytes as float lanes
  const size_t lanes = hn::Lanes(DF());
  const auto low = hn::LowerHalf(d_half, bytes);
  const auto high = hn::UpperHalf(d_half, bytes);
  NormalizeBytes<kType>(d_quarter, hn::LowerHalf(d_quarter, low), scale, bias, out, index);
  NormalizeBytes<kType>(d_quarter, hn::UpperHalf(d_quarter, low), scale, bias, out, index + lanes);
  NormalizeBytes<kType>(d_quarter, hn::LowerHalf(d_quarter, high), scale, bias, out, index + 2 * lanes);
  NormalizeBytes<kType>(d_quarter, hn::UpperHalf(d_quarter, high), scale, bias, out, index + 3 * lanes);
#endif
}

// Pixels [p, p + Lanes(DBytes)) of one image, de-interleaved with
// LoadInterleaved2/3/4, to their planes.
template <FloatType kType, int kChannels>
HWY_INLINE void NormalizePlanarStep(const uint8_t* in, size_t p, size_t pixels, const float* scale,
                                    const float* bias, void* out, size_t out_index) {
  const DBytes d8;
  const uint8_t* src = in + p * kChannels;
  hn::Vec<DBytes> c[4];
  if constexpr (kChannels == 1) c[0] = hn::LoadU(d8, src);
  if constexpr (kChannels == 2) hn::LoadInterleaved2(d8, src, c[0], c[1]);
  if constexpr (kChannels == 3) hn::LoadInterleaved3(d8, src, c[0], c[1], c[2]);
  if constexpr (kChannels == 4) hn::LoadInterleaved4(d8, src, c[0], c[1], c[2], c[3]);
  for (int k = 0; k < kChannels; ++k)
    NormalizeChannel<kType>(c[k], scale[k], bias[k], out, out_index + k * pixels + p);
}

// One HWC image in, CHW out.
template <FloatType kType, int kChannels>
void NormalizePlanarImage(const uint8_t* in, size_t pixels, const float* scale, const float* bias, void* out,
                          size_t out_index) {
  const size_t step = hn::Lanes(DBytes());  // pixels per step
  if (pixels < step) {
    for (size_t p = 0; p < pixels; ++p) {
      for (int c = 0; c < kChannels; ++c) {
        StoreValue<kType>(in[p * kChannels + c] * scale[c] + bias[c], out, out_index + c * pixels + p);
      }
    }
    return;
  }
  size_t p = 0;
  for (; p + step <= pixels; p += step) {
    NormalizePlanarStep<kType, kChannels>(in, p, pixels, scale, bias, out, out_index);
  }
  // The last step overlaps the one before: the same values again.
  if (p < pixels)
    NormalizePlanarStep<kType, kChannels>(in, pixels - step, pixels, scale, bias, out, out_index);
}

template <FloatType kType>
void NormalizePlanar(const uint8_t* in, size_t pixels, int channels, const float* scale, const float* bias,
                     void* out, size_t out_index) {
  switch (channels) {
    case 1:
      NormalizePlanarImage<kType, 1>(in, pixels, scale, bias, out, out_index);
      break;
    case 2:
      NormalizePlanarImage<kType, 2>(in, pixels, scale, bias, out, out_index);
      break;
    case 3:
      NormalizePlanarImage<kType, 3>(in, pixels, scale, bias, out, out_index);
      break;
    default:
      NormalizePlanarImage<kType, 4>(in, pixels, scale, bias, out, out_index);
      break;
  }
}

template <FloatType kType>
void NormalizeAs(const uint8_t* in, size_t pixels, int count, int channels, const float* scale,
                 const float* bias, Layout layout, void* out) {
  if (layout == Layout::kHWC) {
    NormalizeInterleaved<kType>(in, pixels * channels * count, channels, scale, bias, out);
    return;
  }
  const size_t image_values = pixels * channels;
  for (int i = 0; i < count; ++i) {
    NormalizePlanar<kType>(in + i * image_values, pixels, channels, scale, bias, out, i * image_values);
  }
}

void NormalizeImages(const uint8_t* in, size_t pixels, int count, int channels, const float* scale,
                     const float* bias, FloatType type, Layout layout, void* out) {
  switch (type) {
    case FloatType::kFloat32:
      NormalizeAs<FloatType::kFloat32>(in, pixels, count, channels, scale, bias, layout, out);
      break;
    case FloatType::kFloat16:
      NormalizeAs<FloatType::kFloat16>(in, pixels, count, channels, scale, bias, layout, out);
      break;
    case FloatType::kBFloat16:
      NormalizeAs<FloatType::kBFloat16>(in, pixels, count, channels, scale, bias, layout, out);
      break;
  }
}

}  // namespace sluice::image::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sluice::image {
namespace {
HWY_EXPORT(FlipRows);
HWY_EXPORT(NormalizeImages);
}  // namespace

void Crop(ImageView in, CropWindow window, MutableImageView out) {
  assert(window.top >= 0 && window.left >= 0 && window.top + window.height <= in.height &&
         window.left + window.width <= in.width);
  assert(out.height == window.height && out.width == window.width && out.channels == in.channels);
  const uint8_t* src = in.data + window.top * in.row_bytes() + static_cast<size_t>(window.left) * in.channels;
  for (int y = 0; y < out.height; ++y) {
    std::memcpy(out.data + y * out.row_bytes(), src + y * in.row_bytes(), out.row_bytes());
  }
}

void FlipLeftRight(ImageView in, MutableImageView out) {
  assert(in.height == out.height && in.width == out.width && in.channels == out.channels);
  assert(in.channels >= 1 && in.channels <= 4);
  HWY_DYNAMIC_DISPATCH(FlipRows)(in.data, out.data, in.height, in.width, in.channels);
}

void FlipUpDown(ImageView in, MutableImageView out) {
  assert(in.height == out.height && in.width == out.width && in.channels == out.channels);
  const size_t row = in.row_bytes();
  if (in.data != out.data) {
    for (int y = 0; y < in.height; ++y)
      std::memcpy(out.data + y * row, in.data + (in.height - 1 - y) * row, row);
    return;
  }
  for (int y = 0; y < in.height / 2; ++y) {
    std::swap_ranges(out.data + y * row, out.data + (y + 1) * row, out.data + (in.height - 1 - y) * row);
  }
}

void Normalize(ImageView in, int count, const std::vector<float>& mean, const std::vector<float>& std,
               FloatType type, Layout layout, void* out) {
  assert(static_cast<int>(mean.size()) == in.channels && static_cast<int>(std.size()) == in.channels);
  assert(in.channels >= 1 && in.channels <= 4 && count >= 0);
  // (pixel / 255 - mean) / std as one multiply-add per value.
  float scale[4], bias[4];
  for (int c = 0; c < in.channels; ++c) {
    scale[c] = static_cast<float>(1.0 / (255.0 * std[c]));
    bias[c] = static_cast<float>(-static_cast<double>(mean[c]) / std[c]);
  }
  const size_t pixels = static_cast<size_t>(in.height) * in.width;
  HWY_DYNAMIC_DISPATCH(NormalizeImages)(in.data, pixels, count, in.channels, scale, bias, type, layout, out);
}

}  // namespace sluice::image
#endif  // HWY_ONCE
