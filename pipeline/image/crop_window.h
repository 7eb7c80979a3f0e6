// Where random crops go: torchvision's RandomResizedCrop.get_params and
// RandomCrop, drawn from a seeded generator that gives the same windows
// on every platform.
#ifndef SLUICE_PIPELINE_IMAGE_CROP_WINDOW_H_
#define SLUICE_PIPELINE_IMAGE_CROP_WINDOW_H_

#include <cstdint>

#include "pipeline/image/image_view.h"

namespace sluice::image {

// SplitMix64-seeded xoshiro256** generator: small, fast, and the same
// sequence everywhere (the standard distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  uint64_t operator()() { return Next(); }  // for UniformBelow
  // Uniform in [0, 1).
  double Uniform();
  // Uniform in [low, high).
  double Uniform(double low, double high) { return low + (high - low) * Uniform(); }
  // Uniform integer in [0, n); n > 0.
  int64_t Below(int64_t n);

 private:
  uint64_t state_[4];
};

// RandomResizedCrop's window for an image of height x width: up to 10
// attempts at an area fraction in [scale_min, scale_max] and a log-uniform
// aspect ratio (width / height) in [ratio_min, ratio_max] that fits; else
// the central crop with the ratio clamped to the bounds.
CropWindow RandomResizedCropWindow(int height, int width, double scale_min, double scale_max,
                                   double ratio_min, double ratio_max, Rng& rng);

// A crop_height x crop_width window at a uniform position (the crop must
// fit: crop_height <= height, crop_width <= width).
CropWindow RandomCropWindow(int height, int width, int crop_height, int crop_width, Rng& rng);

// The central crop_height x crop_width window, rounded as torchvision's
// center_crop rounds: top = round((height - crop_height) / 2.0).
CropWindow CenterCropWindow(int height, int width, int crop_height, int crop_width);

}  // namespace sluice::image

#endif  // SLUICE_PIPELINE_IMAGE_CROP_WINDOW_H_
