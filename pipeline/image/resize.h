// Resampling 8-bit HWC images, with the filters of Pillow and
// torchvision: separable, weights computed once per output row and
// column, SIMD inner loops (Highway, dynamic dispatch).
#ifndef SLUICE_PIPELINE_IMAGE_RESIZE_H_
#define SLUICE_PIPELINE_IMAGE_RESIZE_H_

#include "pipeline/image/image_view.h"

namespace sluice::image {

enum class ResizeMethod {
  kBilinear,  // triangle filter; with antialias its support widens by the scale when shrinking,
              // as torchvision's resize(antialias=True) and Pillow's BILINEAR do
  kArea,      // box filter: Pillow's BOX, OpenCV's INTER_AREA when shrinking
  kNearest,   // the source pixel whose centre is nearest (torchvision's NEAREST)
};

// Resizes `in` to the size of `out` (same channels). antialias matters for
// kBilinear only. Thread-safe; allocates its temporary row buffers.
void Resize(ImageView in, MutableImageView out, ResizeMethod method, bool antialias = true);

}  // namespace sluice::image

#endif  // SLUICE_PIPELINE_IMAGE_RESIZE_H_
