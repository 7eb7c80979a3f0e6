// Decoding JPEG (libjpeg-turbo) and PNG (libpng) into 8-bit HWC images,
// whole or (JPEG) only a window of them.
#ifndef SLUICE_PIPELINE_IMAGE_DECODE_H_
#define SLUICE_PIPELINE_IMAGE_DECODE_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/image/image_view.h"

namespace sluice::image {

enum class ImageFormat { kJpeg, kPng };

// What the header says, read without decoding any pixels.
struct ImageInfo {
  ImageFormat format = ImageFormat::kJpeg;
  int height = 0;
  int width = 0;
  int channels = 0;  // as stored: 1 (gray) or 3 (color); PNG alpha is dropped, so never 2 or 4
};

struct DecodeOptions {
  // 0: as stored (1 or 3); 1: gray; 3: RGB. Gray to RGB repeats the value.
  int channels = 0;
  // Images with more pixels are refused before any pixel is decoded (a
  // 30000x30000 header is a decompression bomb).
  int64_t max_pixels = 100'000'000;
};

// InvalidArgument when the bytes are neither JPEG nor PNG ("not a JPEG or
// PNG image (starts with ...)"), when the header is corrupt or truncated,
// or when height * width exceeds options.max_pixels (the message names
// both). Never crashes on any input.
absl::StatusOr<ImageInfo> ReadImageInfo(std::string_view bytes, const DecodeOptions& options = {});

// The channels the decoded image has: options.channels, or info.channels
// when that is 0.
int OutputChannels(const ImageInfo& info, const DecodeOptions& options);

// Decodes the whole image. `allocate(height, width, channels)` returns
// the output buffer (height * width * channels bytes), which the decoder
// fills. A corrupt or truncated image is InvalidArgument with the
// decoder's message (libjpeg's warnings about corrupt data are errors).
absl::Status DecodeImage(std::string_view bytes, const DecodeOptions& options,
                         const std::function<uint8_t*(int height, int width, int channels)>& allocate);

// Decodes `window` (which must lie inside the image) and resizes it to
// out_height x out_width (bilinear, antialiased: resize.h), writing
// out_height * out_width * OutputChannels bytes to `out`. For a JPEG only
// the window is decoded: whole iMCU columns around it (jpeg_crop_scanline),
// rows above it skipped (jpeg_skip_scanlines), and, when the window is at
// least twice the output in both sides, decoded at a DCT scale of 1/2, 1/4
// or 1/8 that keeps it at least as large as the output. Other formats
// decode whole, then crop and resize.
absl::Status DecodeCropResize(std::string_view bytes, const DecodeOptions& options, CropWindow window,
                              int out_height, int out_width, uint8_t* out);

}  // namespace sluice::image

#endif  // SLUICE_PIPELINE_IMAGE_DECODE_H_
