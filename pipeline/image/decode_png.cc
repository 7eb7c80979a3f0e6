// PNG decoding with libpng, which reports errors by longjmp: every method
// that calls into it sets its jump point first and keeps only trivially
// destructible locals (decode.cc says the same of libjpeg).
#include "pipeline/image/decode_png.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace sluice::image {
namespace {

// One libpng decoding of an image in memory; like decode.cc's JpegDecoder, a method
// that returns false leaves only destruction.
class PngDecoder {
 public:
  explicit PngDecoder(std::string_view bytes) : bytes_(bytes) {}
  ~PngDecoder() {
    if (png_ != nullptr) png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr);
  }
  PngDecoder(const PngDecoder&) = delete;
  PngDecoder& operator=(const PngDecoder&) = delete;

  // Reads the chunks up to the first IDAT.
  bool ReadInfo() {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, this, OnError, OnWarning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
    if (info_ == nullptr) {
      std::snprintf(message_, sizeof(message_), "libpng could not start (out of memory?)");
      return false;
    }
    if (setjmp(png_jmpbuf(png_))) return false;
    png_set_read_fn(png_, this, Read);
    png_read_info(png_, info_);
    return true;
  }

  // Sets up the transformations to 8-bit gray (1) or RGB (3), alpha
  // dropped.
  bool Configure(int out_channels) {
    if (setjmp(png_jmpbuf(png_))) return false;
    const int color_type = png_get_color_type(png_, info_);
    const int bit_depth = png_get_bit_depth(png_, info_);
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png_);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png_);
    if (bit_depth == 16) png_set_strip_16(png_);  // the high byte, as Pillow's "RGB;16B"
    // Also drops the alpha that palette_to_rgb makes of a tRNS chunk.
    png_set_strip_alpha(png_);
    const bool color = (color_type & PNG_COLOR_MASK_COLOR) != 0;
    if (out_channels == 1 && color) png_set_rgb_to_gray_fixed(png_, /*error_action=*/1, -1, -1);
    if (out_channels == 3 && !color) png_set_gray_to_rgb(png_);
    passes_ = png_set_interlace_handling(png_);
    png_read_update_info(png_, info_);
    return true;
  }

  // Reads all rows (all passes, when interlaced) to `out`, `row_bytes`
  // apart. The chunks after the image data are not read: like Pillow, a
  // file cut after its last IDAT still decodes.
  bool ReadRows(uint8_t* out, size_t row_bytes) {
    if (setjmp(png_jmpbuf(png_))) return false;
    const png_uint_32 height = png_get_image_height(png_, info_);
    for (int pass = 0; pass < passes_; ++pass) {
      for (png_uint_32 y = 0; y < height; ++y) png_read_row(png_, out + y * row_bytes, nullptr);
    }
    return true;
  }

  absl::Status Error() const { return absl::InvalidArgumentError(absl::StrCat("invalid PNG: ", message_)); }
  png_structp png() const { return png_; }
  png_infop info() const { return info_; }

 private:
  static void OnError(png_structp png, png_const_charp message) {
    auto* self = static_cast<PngDecoder*>(png_get_error_ptr(png));
    std::snprintf(self->message_, sizeof(self->message_), "%s", message);
    png_longjmp(png, 1);
  }
  static void OnWarning(png_structp, png_const_charp) {}  // never print to stderr

  static void Read(png_structp png, png_bytep data, size_t length) {
    auto* self = static_cast<PngDecoder*>(png_get_io_ptr(png));
    if (length > self->bytes_.size() - self->position_) png_error(png, "truncated (data ends early)");
    std::memcpy(data, self->bytes_.data() + self->position_, length);
    self->position_ += length;
  }

  const std::string_view bytes_;
  size_t position_ = 0;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
  int passes_ = 1;
  char message_[256] = {};
};

absl::StatusOr<ImageInfo> OpenPng(PngDecoder& decoder, const DecodeOptions& options) {
  if (!decoder.ReadInfo()) return decoder.Error();
  ImageInfo info;
  info.format = ImageFormat::kPng;
  // libpng refuses sizes over 2^31 - 1 (and over a million, its default
  // user limit), so these fit.
  info.height = static_cast<int>(png_get_image_height(decoder.png(), decoder.info()));
  info.width = static_cast<int>(png_get_image_width(decoder.png(), decoder.info()));
  info.channels = (png_get_color_type(decoder.png(), decoder.info()) & PNG_COLOR_MASK_COLOR) != 0 ? 3 : 1;
  if (absl::Status status = CheckImageSize(info.height, info.width, options); !status.ok()) return status;
  return info;
}

}  // namespace

absl::StatusOr<ImageInfo> ReadPngInfo(std::string_view bytes, const DecodeOptions& options) {
  PngDecoder decoder(bytes);
  return OpenPng(decoder, options);
}

absl::Status DecodePng(std::string_view bytes, const DecodeOptions& options,
                       const std::function<uint8_t*(int height, int width, int channels)>& allocate) {
  PngDecoder decoder(bytes);
  absl::StatusOr<ImageInfo> info = OpenPng(decoder, options);
  if (!info.ok()) return info.status();
  const int channels = OutputChannels(*info, options);
  if (!decoder.Configure(channels)) return decoder.Error();
  const size_t row_bytes = static_cast<size_t>(info->width) * channels;
  if (png_get_channels(decoder.png(), decoder.info()) != channels ||
      png_get_bit_depth(decoder.png(), decoder.info()) != 8 ||
      png_get_rowbytes(decoder.png(), decoder.info()) != row_bytes) {
    return absl::InternalError("libpng does not decode to the expected 8-bit layout");
  }
  uint8_t* out = allocate(info->height, info->width, channels);
  if (out == nullptr) return absl::InternalError("DecodeImage: allocate returned no buffer");
  if (!decoder.ReadRows(out, row_bytes)) return decoder.Error();
  return absl::OkStatus();
}

}  // namespace sluice::image
