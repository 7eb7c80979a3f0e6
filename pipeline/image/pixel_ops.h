// Crops, flips and normalization of 8-bit HWC images. Flip and normalize
// take a batch of same-sized images at once (count images back to back).
#ifndef SLUICE_PIPELINE_IMAGE_PIXEL_OPS_H_
#define SLUICE_PIPELINE_IMAGE_PIXEL_OPS_H_

#include <cstdint>
#include <vector>

#include "pipeline/image/image_view.h"

namespace sluice::image {

// Copies `window` (inside `in`) to `out`, which is window-sized.
void Crop(ImageView in, CropWindow window, MutableImageView out);

// out may equal in (in place).
void FlipLeftRight(ImageView in, MutableImageView out);
void FlipUpDown(ImageView in, MutableImageView out);

enum class Layout { kHWC, kCHW };
enum class FloatType { kFloat32, kFloat16, kBFloat16 };

// One pass from uint8 to out = (pixel / 255 - mean[c]) / std[c],
// torchvision's ToTensor then Normalize, for `count` images of in's size
// back to back in in.data. `out` holds count * H * W * C values of `type`
// (2 bytes for float16 and bfloat16, round to nearest even), in `layout`
// per image. mean and std have one value per channel.
void Normalize(ImageView in, int count, const std::vector<float>& mean, const std::vector<float>& std,
               FloatType type, Layout layout, void* out);

}  // namespace sluice::image

#endif  // SLUICE_PIPELINE_IMAGE_PIXEL_OPS_H_
