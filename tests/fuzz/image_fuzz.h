// What jpeg_decode_fuzzer and png_decode_fuzzer share: the header read,
// then a whole decode (as stored, gray and RGB) and a window decoded and
// resized, under a pixel limit of 4 M so that a header's dimensions cannot
// make the target run out of memory (past it: InvalidArgument).
#ifndef SLUICE_TESTS_FUZZ_IMAGE_FUZZ_H_
#define SLUICE_TESTS_FUZZ_IMAGE_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "pipeline/image/decode.h"

namespace sluice::fuzz {

inline void DecodeImageBytes(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  image::DecodeOptions options;
  options.max_pixels = int64_t{1} << 22;
  absl::StatusOr<image::ImageInfo> info = image::ReadImageInfo(bytes, options);
  if (!info.ok()) return;
  std::vector<uint8_t> pixels;
  for (int channels : {0, 1, 3}) {
    options.channels = channels;
    (void)image::DecodeImage(bytes, options, [&](int height, int width, int c) {
      pixels.assign(static_cast<size_t>(height) * width * c, 0);
      return pixels.data();
    });
  }
  options.channels = 3;
  const image::CropWindow window{info->height / 4, info->width / 4, (info->height + 1) / 2,
                                 (info->width + 1) / 2};
  std::vector<uint8_t> out(8 * 8 * 3);
  (void)image::DecodeCropResize(bytes, options, window, 8, 8, out.data());
}

}  // namespace sluice::fuzz

#endif  // SLUICE_TESTS_FUZZ_IMAGE_FUZZ_H_
