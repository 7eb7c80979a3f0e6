// Test helpers: images encoded in memory (libjpeg, libpng) and
// deterministic photo-like pixels, so that the image tests need no files.
// An encoder failure is a bug in the test, so these abort instead of
// returning a status.
#ifndef SLUICE_PIPELINE_IMAGE_TEST_IMAGES_H_
#define SLUICE_PIPELINE_IMAGE_TEST_IMAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/image/image_view.h"

namespace sluice::image {

enum class JpegSubsampling { k444, k422, k420 };

struct JpegEncodeOptions {
  int quality = 95;
  JpegSubsampling subsampling = JpegSubsampling::k420;  // of colour images
  bool progressive = false;
};

// Channels 1 (gray), 3 (RGB, stored as YCbCr) or 4 (CMYK, the bytes stored
// as given with an Adobe marker, which by Adobe's convention means
// inverted: 255 is no ink).
std::string EncodeJpeg(ImageView image, int quality);
std::string EncodeJpeg(ImageView image, const JpegEncodeOptions& options);

struct PngEncodeOptions {
  // Each sample v is written as the 16-bit (v << 8) | (v ^ 0x5A): an exact
  // decoder to 8 bits keeps the high byte, a rounding one would not.
  bool sixteen_bit = false;
  bool interlaced = false;  // Adam7
  // RGB only, at most 256 colours; also writes a tRNS chunk making the
  // first palette entry half transparent.
  bool palette = false;
};

// Channels 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA).
std::string EncodePng(ImageView image);
std::string EncodePng(ImageView image, const PngEncodeOptions& options);

// height x width x channels pixels (HWC) that look like a photo to a
// codec: gradients, a few flat and round shapes with sharp edges, and
// noise. The same for the same arguments on every platform.
std::vector<uint8_t> PhotoLikePixels(int height, int width, int channels, uint64_t seed);

}  // namespace sluice::image

#endif  // SLUICE_PIPELINE_IMAGE_TEST_IMAGES_H_
