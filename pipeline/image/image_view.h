// Views of 8-bit images in HWC layout (rows contiguous, channels
// interleaved), which the image kernels read and write. The kernels know
// nothing of tensors or the engine, so that they can be tested and
// benchmarked alone.
#ifndef SLUICE_PIPELINE_IMAGE_IMAGE_VIEW_H_
#define SLUICE_PIPELINE_IMAGE_IMAGE_VIEW_H_

#include <cstddef>
#include <cstdint>

namespace sluice::image {

struct ImageView {
  const uint8_t* data = nullptr;
  int height = 0;
  int width = 0;
  int channels = 0;

  size_t row_bytes() const { return static_cast<size_t>(width) * channels; }
  size_t byte_size() const { return static_cast<size_t>(height) * row_bytes(); }
};

struct MutableImageView {
  uint8_t* data = nullptr;
  int height = 0;
  int width = 0;
  int channels = 0;

  size_t row_bytes() const { return static_cast<size_t>(width) * channels; }
  size_t byte_size() const { return static_cast<size_t>(height) * row_bytes(); }
  ImageView view() const { return {data, height, width, channels}; }
};

// A rectangle of an image, in pixels: rows [top, top + height), columns
// [left, left + width).
struct CropWindow {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;

  bool operator==(const CropWindow& other) const = default;
};

}  // namespace sluice::image

#endif  // SLUICE_PIPELINE_IMAGE_IMAGE_VIEW_H_
