// PNG decoding for decode.cc (internal to pipeline/image/), and the size
// check both decoders share.
#ifndef SLUICE_PIPELINE_IMAGE_DECODE_PNG_H_
#define SLUICE_PIPELINE_IMAGE_DECODE_PNG_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/status/statusor.h"
#include "pipeline/image/decode.h"

namespace sluice::image {

// Refuses empty images and decompression bombs before anything is decoded.
absl::Status CheckImageSize(int64_t height, int64_t width, const DecodeOptions& options);

// A PNG's size and channels, from its chunks before the image data.
absl::StatusOr<ImageInfo> ReadPngInfo(std::string_view bytes, const DecodeOptions& options);

// Decodes a PNG to 8-bit rows in the buffer `allocate` gives.
absl::Status DecodePng(std::string_view bytes, const DecodeOptions& options,
                       const std::function<uint8_t*(int height, int width, int channels)>& allocate);

}  // namespace sluice::image

#endif  // SLUICE_PIPELINE_IMAGE_DECODE_PNG_H_
