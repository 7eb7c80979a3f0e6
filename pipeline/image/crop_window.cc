#include "pipeline/image/crop_window.h"

#include <cassert>
#include <cmath>

#include "pipeline/random.h"

namespace sluice::image {
namespace {

uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Python's round() on a float: halves go to the even neighbour, which is
// what nearbyint does in the default rounding mode (std::round would not).
int RoundHalfEven(double x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace

Rng::Rng(uint64_t seed) {
  // SplitMix64 expansion: never leaves the state all zero, and nearby seeds
  // give unrelated states.
  uint64_t s = seed;
  for (uint64_t& word : state_) {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    word = z ^ (z >> 31);
  }
}

uint64_t Rng::Next() {  // xoshiro256**
  const uint64_t result = RotateLeft(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = RotateLeft(state_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int64_t Rng::Below(int64_t n) {
  assert(n > 0);
  return static_cast<int64_t>(UniformBelow(*this, static_cast<uint64_t>(n)));
}

CropWindow RandomResizedCropWindow(int height, int width, double scale_min, double scale_max,
                                   double ratio_min, double ratio_max, Rng& rng) {
  assert(height > 0 && width > 0);
  const double area = static_cast<double>(height) * width;
  const double log_ratio_min = std::log(ratio_min);
  const double log_ratio_max = std::log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(scale_min, scale_max);
    const double aspect = std::exp(rng.Uniform(log_ratio_min, log_ratio_max));
    const int w = RoundHalfEven(std::sqrt(target_area * aspect));
    const int h = RoundHalfEven(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      // top before left, as torchvision draws them.
      const int top = static_cast<int>(rng.Below(height - h + 1));
      const int left = static_cast<int>(rng.Below(width - w + 1));
      return {top, left, h, w};
    }
  }
  // No attempt fitted: the central crop, its ratio clamped to the bounds.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < ratio_min) {
    h = RoundHalfEven(w / ratio_min);
  } else if (in_ratio > ratio_max) {
    w = RoundHalfEven(h * ratio_max);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

CropWindow RandomCropWindow(int height, int width, int crop_height, int crop_width, Rng& rng) {
  assert(0 < crop_height && crop_height <= height && 0 < crop_width && crop_width <= width);
  const int top = static_cast<int>(rng.Below(height - crop_height + 1));
  const int left = static_cast<int>(rng.Below(width - crop_width + 1));
  return {top, left, crop_height, crop_width};
}

CropWindow CenterCropWindow(int height, int width, int crop_height, int crop_width) {
  return {RoundHalfEven((height - crop_height) / 2.0), RoundHalfEven((width - crop_width) / 2.0), crop_height,
          crop_width};
}

}  // namespace sluice::image
