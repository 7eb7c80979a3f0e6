// Resampling as Pillow's ImagingResample does it: per axis, each output
// pixel is a normalized weighted sum of a run of input pixels, the weights
// computed once per call. The two axes run one after the other through a
// float intermediate (Pillow rounds to 8 bits in between; float is more
// accurate and stays well within a level of Pillow and torchvision).
//
// What is SIMD (Highway, dynamic dispatch): the vertical pass (a weighted
// sum of whole rows, full vector width), the u8 <-> f32 conversions, and
// the horizontal pass, which runs one output pixel per 4-lane vector (its
// channels side by side) for 2..4 channels, and one output pixel per
// 4-tap dot product for 1 channel. kNearest is a scalar copy.
#include "pipeline/image/resize.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "pipeline/image/resize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

// Shared by every target's copy of the kernels; this file is compiled once
// per target, so the definitions are guarded.
#ifndef SLUICE_PIPELINE_IMAGE_RESIZE_CC_SHARED_
#define SLUICE_PIPELINE_IMAGE_RESIZE_CC_SHARED_
namespace sluice::image::resize_internal {

// One axis's resampling weights: output index i reads input indices
// [first[i], first[i] + count[i]) with weights[i * stride ...].
struct AxisFilter {
  int stride = 0;     // weights per output, a multiple of 4 (zero past count)
  int max_count = 0;  // the largest count
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;

  double MeanTaps() const {
    double sum = 0;
    for (int c : count) sum += c;
    return count.empty() ? 0 : sum / count.size();
  }
};

// Floats of slack after each float row, so that the horizontal kernel may
// read max_count taps from every output's first pixel (and whole 4-lane
// vectors past a row's last pixel) whatever the counts.
inline size_t RowSlack(const AxisFilter& horizontal) { return horizontal.stride * 4 + 4; }

}  // namespace sluice::image::resize_internal
#endif  // SLUICE_PIPELINE_IMAGE_RESIZE_CC_SHARED_

HWY_BEFORE_NAMESPACE();
namespace sluice::image::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using resize_internal::AxisFilter;

using DF = hn::ScalableTag<float>;

// Round half up and saturate, as Pillow's fixed point does: truncating
// x + 0.5 gives the same answer for every x that can reach here.
inline uint8_t RoundToU8(float x) {
  x += 0.5f;
  if (!(x > 0.0f)) return 0;
  if (x >= 255.0f) return 255;
  return static_cast<uint8_t>(x);
}

inline hn::Vec<DF> LoadAsFloat(DF df, const float* p) { return hn::LoadU(df, p); }
inline hn::Vec<DF> LoadAsFloat(DF df, const uint8_t* p) {
  const hn::Rebind<uint8_t, DF> d8;
  const hn::Rebind<int32_t, DF> di;
  return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
}

inline void StoreFromFloat(DF df, hn::Vec<DF> v, float* p) { hn::StoreU(v, df, p); }
inline void StoreFromFloat(DF df, hn::Vec<DF> v, uint8_t* p) {
  const hn::Rebind<uint8_t, DF> d8;
  const hn::Rebind<int32_t, DF> di;
  // ConvertTo truncates; DemoteTo saturates to 0..255.
  hn::StoreU(hn::DemoteTo(d8, hn::ConvertTo(di, hn::Add(v, hn::Set(df, 0.5f)))), d8, p);
}

inline float ScalarAsFloat(float x) { return x; }
inline float ScalarAsFloat(uint8_t x) { return x; }
inline void ScalarStore(float x, float* p) { *p = x; }
inline void ScalarStore(float x, uint8_t* p) { *p = RoundToU8(x); }

// out[i] = sum_k weights[k] * rows[k][i] for i < n. The last vector may
// overlap the one before it (recomputing the same values), so there is no
// scalar tail unless n is below one vector.
template <typename In, typename Out>
void VerticalSum(const In* const* rows, const float* weights, int taps, size_t n, Out* out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  auto one_vector = [&](size_t i) {
    auto acc = hn::Zero(df);
    for (int k = 0; k < taps; ++k)
      acc = hn::MulAdd(hn::Set(df, weights[k]), LoadAsFloat(df, rows[k] + i), acc);
    StoreFromFloat(df, acc, out + i);
  };
  if (n < lanes) {
    for (size_t i = 0; i < n; ++i) {
      float acc = 0;
      for (int k = 0; k < taps; ++k) acc += weights[k] * ScalarAsFloat(rows[k][i]);
      ScalarStore(acc, out + i);
    }
    return;
  }
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) one_vector(i);
  if (i < n) one_vector(n - lanes);
}

// Converts a row to float for the horizontal pass.
void U8ToFloat(const uint8_t* in, size_t n, float* out) {
  const float weight = 1.0f;
  VerticalSum(&in, &weight, 1, n, out);
}

void FloatToU8(const float* in, size_t n, uint8_t* out) {
  const float weight = 1.0f;
  VerticalSum(&in, &weight, 1, n, out);
}

#if HWY_TARGET != HWY_SCALAR
// The horizontal pass for 2..4 channels: a pixel's channels fit in one
// 4-lane vector; the lanes past kChannels belong to the next pixel and are
// overwritten by the next store. kTaps > 0 fixes (and unrolls) the tap
// count; two accumulators halve the chain of dependent multiply-adds.
template <int kChannels, int kTaps>
void HorizontalPixels(const float* in, const AxisFilter& filter, int taps, float* out) {
  const hn::FixedTag<float, 4> d4;
  const int n = kTaps > 0 ? kTaps : taps;
  const int out_width = static_cast<int>(filter.first.size());
  for (int x = 0; x < out_width; ++x) {
    const float* weights = &filter.weights[static_cast<size_t>(x) * filter.stride];
    const float* pixel = in + static_cast<size_t>(filter.first[x]) * kChannels;
    auto even = hn::Zero(d4);
    auto odd = hn::Zero(d4);
    int k = 0;
    for (; k + 1 < n; k += 2) {
      even = hn::MulAdd(hn::Set(d4, weights[k]), hn::LoadU(d4, pixel + k * kChannels), even);
      odd = hn::MulAdd(hn::Set(d4, weights[k + 1]), hn::LoadU(d4, pixel + (k + 1) * kChannels), odd);
    }
    if (k < n) even = hn::MulAdd(hn::Set(d4, weights[k]), hn::LoadU(d4, pixel + k * kChannels), even);
    hn::StoreU(hn::Add(even, odd), d4, out + static_cast<size_t>(x) * kChannels);
  }
}

template <int kChannels>
void HorizontalPixelsAnyTaps(const float* in, const AxisFilter& filter, int taps, float* out) {
  switch (taps) {  // the counts of shrinking by up to 3.5x and of enlarging
    case 2:
      return HorizontalPixels<kChannels, 2>(in, filter, taps, out);
    case 3:
      return HorizontalPixels<kChannels, 3>(in, filter, taps, out);
    case 4:
      return HorizontalPixels<kChannels, 4>(in, filter, taps, out);
    case 5:
      return HorizontalPixels<kChannels, 5>(in, filter, taps, out);
    case 6:
      return HorizontalPixels<kChannels, 6>(in, filter, taps, out);
    case 7:
      return HorizontalPixels<kChannels, 7>(in, filter, taps, out);
    case 8:
      return HorizontalPixels<kChannels, 8>(in, filter, taps, out);
    default:
      return HorizontalPixels<kChannels, 0>(in, filter, taps, out);
  }
}
#endif

// One row along the horizontal axis: `in` holds the input row as floats
// with RowSlack zeros after it; `out` has RowSlack floats of room after it.
void HorizontalSum(const float* in, const AxisFilter& filter, int channels, float* out) {
  const int out_width = static_cast<int>(filter.first.size());
#if HWY_TARGET == HWY_SCALAR
  for (int x = 0; x < out_width; ++x) {
    const float* weights = &filter.weights[static_cast<size_t>(x) * filter.stride];
    const float* pixel = in + static_cast<size_t>(filter.first[x]) * channels;
    for (int c = 0; c < channels; ++c) {
      float acc = 0;
      for (int k = 0; k < filter.count[x]; ++k) acc += weights[k] * pixel[k * channels + c];
      out[x * channels + c] = acc;
    }
  }
#else
  // Every output runs max_count taps (the weights past its count are zero,
  // and so is the slack): a trip count that never changes is never
  // mispredicted, which costs more than the few extra taps.
  const int taps = filter.max_count;
  const hn::FixedTag<float, 4> d4;
  if (channels == 1) {
    // Taps are contiguous: a dot product, 4 taps at a time. Weights past
    // count are zero and the row's slack is zero, so whole groups are safe.
    for (int x = 0; x < out_width; ++x) {
      const float* weights = &filter.weights[static_cast<size_t>(x) * filter.stride];
      const float* pixel = in + filter.first[x];
      auto acc = hn::Zero(d4);
      for (int k = 0; k < taps; k += 4) {
        acc = hn::MulAdd(hn::LoadU(d4, weights + k), hn::LoadU(d4, pixel + k), acc);
      }
      out[x] = hn::GetLane(hn::SumOfLanes(d4, acc));
    }
    return;
  }
  switch (channels) {
    case 2:
      HorizontalPixelsAnyTaps<2>(in, filter, taps, out);
      break;
    case 3:
      HorizontalPixelsAnyTaps<3>(in, filter, taps, out);
      break;
    default:
      HorizontalPixelsAnyTaps<4>(in, filter, taps, out);
      break;
  }
#endif
}

// Either filter may be null (that axis keeps its size). vertical_first
// picks the order of the passes when both run.
void ResampleImage(const uint8_t* in, int in_width, uint8_t* out, int out_height, int out_width, int channels,
                   const AxisFilter* horizontal, const AxisFilter* vertical, bool vertical_first) {
  const size_t in_row = static_cast<size_t>(in_width) * channels;
  const size_t out_row = static_cast<size_t>(out_width) * channels;
  auto input_rows = [&](const auto* base, size_t row_size, int first, int count, auto* rows) {
    for (int k = 0; k < count; ++k) rows[k] = base + static_cast<size_t>(first + k) * row_size;
  };

  if (horizontal == nullptr) {  // vertical only: straight from u8 rows to u8 rows
    std::vector<const uint8_t*> rows(vertical->stride);
    for (int y = 0; y < out_height; ++y) {
      input_rows(in, in_row, vertical->first[y], vertical->count[y], rows.data());
      VerticalSum(rows.data(), &vertical->weights[static_cast<size_t>(y) * vertical->stride],
                  vertical->count[y], in_row, out + y * out_row);
    }
    return;
  }

  const size_t slack = resize_internal::RowSlack(*horizontal);
  std::vector<float> in_floats(in_row + slack);  // zero slack matters (see HorizontalSum)
  std::vector<float> out_floats(out_row + slack);
  if (vertical == nullptr) {
    for (int y = 0; y < out_height; ++y) {
      U8ToFloat(in + y * in_row, in_row, in_floats.data());
      HorizontalSum(in_floats.data(), *horizontal, channels, out_floats.data());
      FloatToU8(out_floats.data(), out_row, out + y * out_row);
    }
    return;
  }

  if (vertical_first) {
    std::vector<const uint8_t*> rows(vertical->stride);
    for (int y = 0; y < out_height; ++y) {
      input_rows(in, in_row, vertical->first[y], vertical->count[y], rows.data());
      VerticalSum(rows.data(), &vertical->weights[static_cast<size_t>(y) * vertical->stride],
                  vertical->count[y], in_row, in_floats.data());
      HorizontalSum(in_floats.data(), *horizontal, channels, out_floats.data());
      FloatToU8(out_floats.data(), out_row, out + y * out_row);
    }
    return;
  }

  // Horizontal first: every input row the vertical pass reads, resampled
  // to the output width, then the vertical pass over those float rows.
  const int first_row = vertical->first.front();
  const int end_row = vertical->first.back() + vertical->count.back();
  // The rows are written in order below, each store overshooting into the
  // next row before that row is written, or into the slack after the last
  // (zeroed for tidiness; it is never read). A zero-filled vector here was
  // 2% of the ImageNet pipeline.
  const size_t narrowed_floats = static_cast<size_t>(end_row - first_row) * out_row;
  auto narrowed = std::make_unique_for_overwrite<float[]>(narrowed_floats + slack);
  std::fill_n(narrowed.get() + narrowed_floats, slack, 0.0f);
  for (int y = first_row; y < end_row; ++y) {
    U8ToFloat(in + y * in_row, in_row, in_floats.data());
    HorizontalSum(in_floats.data(), *horizontal, channels, &narrowed[(y - first_row) * out_row]);
  }
  std::vector<const float*> rows(vertical->stride);
  for (int y = 0; y < out_height; ++y) {
    input_rows(narrowed.get(), out_row, vertical->first[y] - first_row, vertical->count[y], rows.data());
    VerticalSum(rows.data(), &vertical->weights[static_cast<size_t>(y) * vertical->stride],
                vertical->count[y], out_row, out + y * out_row);
  }
}

}  // namespace sluice::image::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sluice::image {
namespace {

using resize_internal::AxisFilter;

HWY_EXPORT(ResampleImage);

double Triangle(double t) {
  t = std::fabs(t);
  return t < 1.0 ? 1.0 - t : 0.0;
}

// Pillow's box: the half-open interval is (-0.5, 0.5], as in Resample.c.
double Box(double t) { return (t > -0.5 && t <= 0.5) ? 1.0 : 0.0; }

// Pillow's precompute_coeffs, in double, normalized, then stored as float.
AxisFilter MakeAxisFilter(int in_size, int out_size, ResizeMethod method, bool antialias) {
  const bool box = method == ResizeMethod::kArea;
  const double scale = static_cast<double>(in_size) / out_size;
  // When shrinking the filter stretches to cover every input pixel (that is
  // the antialiasing); plain bilinear keeps it at one pixel.
  const double filter_scale = (box || antialias) ? std::max(scale, 1.0) : 1.0;
  const double support = (box ? 0.5 : 1.0) * filter_scale;
  const int max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;

  AxisFilter filter;
  filter.stride = (max_taps + 3) / 4 * 4;
  filter.first.resize(out_size);
  filter.count.resize(out_size);
  filter.weights.assign(static_cast<size_t>(out_size) * filter.stride, 0.0f);
  std::vector<double> taps(max_taps);
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    // int() truncates as Pillow's cast does; negatives are clamped anyway.
    const int first = std::max(static_cast<int>(center - support + 0.5), 0);
    const int end = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int count = std::min(end - first, max_taps);
    double sum = 0;
    for (int k = 0; k < count; ++k) {
      const double t = (first + k - center + 0.5) / filter_scale;
      taps[k] = box ? Box(t) : Triangle(t);
      sum += taps[k];
    }
    float* weights = &filter.weights[static_cast<size_t>(i) * filter.stride];
    for (int k = 0; k < count; ++k) weights[k] = static_cast<float>(sum != 0.0 ? taps[k] / sum : taps[k]);
    filter.first[i] = first;
    filter.count[i] = count;
    filter.max_count = std::max(filter.max_count, count);
  }
  return filter;
}

// torchvision's nearest_idx: the scale is a float and the product is
// floored in float, which is what makes its choices (and ours) differ from
// exact integer arithmetic on some sizes.
std::vector<int> NearestSources(int in_size, int out_size) {
  std::vector<int> sources(out_size);
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  for (int i = 0; i < out_size; ++i) {
    if (out_size == in_size) {
      sources[i] = i;
    } else if (out_size == 2 * in_size) {
      sources[i] = i >> 1;
    } else {
      sources[i] = std::min(static_cast<int>(std::floor(static_cast<float>(i) * scale)), in_size - 1);
    }
  }
  return sources;
}

template <int kChannels>  // a constant size, so that memcpy is a move, not a call
void CopyPixels(const uint8_t* in_row, const std::vector<int>& source_columns, uint8_t* out_row) {
  for (size_t x = 0; x < source_columns.size(); ++x) {
    std::memcpy(out_row + x * kChannels, in_row + source_columns[x] * kChannels, kChannels);
  }
}

void ResizeNearest(ImageView in, MutableImageView out) {
  const std::vector<int> source_rows = NearestSources(in.height, out.height);
  const std::vector<int> source_columns = NearestSources(in.width, out.width);
  for (int y = 0; y < out.height; ++y) {
    const uint8_t* in_row = in.data + source_rows[y] * in.row_bytes();
    uint8_t* out_row = out.data + y * out.row_bytes();
    switch (in.channels) {
      case 1:
        CopyPixels<1>(in_row, source_columns, out_row);
        break;
      case 2:
        CopyPixels<2>(in_row, source_columns, out_row);
        break;
      case 3:
        CopyPixels<3>(in_row, source_columns, out_row);
        break;
      default:
        CopyPixels<4>(in_row, source_columns, out_row);
        break;
    }
  }
}

}  // namespace

void Resize(ImageView in, MutableImageView out, ResizeMethod method, bool antialias) {
  assert(in.channels == out.channels && in.channels >= 1 && in.channels <= 4);
  assert(in.height > 0 && in.width > 0 && out.height > 0 && out.width > 0);
  if (method == ResizeMethod::kNearest) {
    ResizeNearest(in, out);
    return;
  }
  // An axis that keeps its size is skipped, as Pillow skips it; with both
  // kept the image is copied unchanged.
  const bool resize_rows = in.height != out.height;
  const bool resize_columns = in.width != out.width;
  if (!resize_rows && !resize_columns) {
    if (out.data != in.data) std::memcpy(out.data, in.data, in.byte_size());
    return;
  }
  AxisFilter vertical, horizontal;
  if (resize_rows) vertical = MakeAxisFilter(in.height, out.height, method, antialias);
  if (resize_columns) horizontal = MakeAxisFilter(in.width, out.width, method, antialias);

  bool vertical_first = true;
  if (resize_rows && resize_columns) {
    // Rough cost in multiply-adds: the vertical pass runs a vector's worth
    // of values per operation (assume 8 lanes), the horizontal pass one
    // pixel. Whichever pass runs first runs at the input's size on the
    // other axis.
    const double channels = in.channels;
    const double vertical_taps = vertical.MeanTaps();
    const double horizontal_taps =
        in.channels == 1 ? (horizontal.max_count + 3) / 4 + 2 : horizontal.max_count;  // see HorizontalSum
    const double rows_read = vertical.first.back() + vertical.count.back() - vertical.first.front();
    const double cost_vertical_first =
        out.height * (in.width * channels * vertical_taps / 8 + out.width * horizontal_taps);
    const double cost_horizontal_first = rows_read * (in.width * channels / 8 + out.width * horizontal_taps) +
                                         out.height * out.width * channels * vertical_taps / 8;
    vertical_first = cost_vertical_first <= cost_horizontal_first;
  }
  HWY_DYNAMIC_DISPATCH(ResampleImage)
  (in.data, in.width, out.data, out.height, out.width, in.channels, resize_columns ? &horizontal : nullptr,
   resize_rows ? &vertical : nullptr, vertical_first);
}

}  // namespace sluice::image
#endif  // HWY_ONCE
