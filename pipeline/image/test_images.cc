#include "pipeline/image/test_images.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

// libjpeg's headers need FILE and size_t declared first.
#include <jpeglib.h>
#include <png.h>

namespace sluice::image {
namespace {

[[noreturn]] void Die(const char* what, const char* message) {
  std::fprintf(stderr, "test_images: %s failed: %s\n", what, message);
  std::abort();
}

[[noreturn]] void OnJpegError(j_common_ptr cinfo) {
  char message[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, message);
  Die("libjpeg", message);
}

[[noreturn]] void OnPngError(png_structp, png_const_charp message) { Die("libpng", message); }
void OnPngWarning(png_structp, png_const_charp) {}

void AppendToString(png_structp png, png_bytep data, size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), length);
}
void Flush(png_structp) {}

// SplitMix64: small and the same everywhere.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

}  // namespace

std::string EncodeJpeg(ImageView image, int quality) {
  JpegEncodeOptions options;
  options.quality = quality;
  return EncodeJpeg(image, options);
}

std::string EncodeJpeg(ImageView image, const JpegEncodeOptions& options) {
  if (image.channels != 1 && image.channels != 3 && image.channels != 4) Die("EncodeJpeg", "channels");
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  err.error_exit = OnJpegError;
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = image.width;
  cinfo.image_height = image.height;
  cinfo.input_components = image.channels;
  cinfo.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : image.channels == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&cinfo);  // CMYK gets an Adobe marker
  jpeg_set_quality(&cinfo, options.quality, /*force_baseline=*/TRUE);
  if (image.channels == 3) {
    cinfo.comp_info[0].h_samp_factor = options.subsampling == JpegSubsampling::k444 ? 1 : 2;
    cinfo.comp_info[0].v_samp_factor = options.subsampling == JpegSubsampling::k420 ? 2 : 1;
  }
  if (options.progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(image.data + cinfo.next_scanline * image.row_bytes());
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string encoded(reinterpret_cast<const char*>(buffer), size);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return encoded;
}

std::string EncodePng(ImageView image) { return EncodePng(image, PngEncodeOptions{}); }

std::string EncodePng(ImageView image, const PngEncodeOptions& options) {
  static constexpr int kColorTypes[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                        PNG_COLOR_TYPE_RGB_ALPHA};
  if (image.channels < 1 || image.channels > 4) Die("EncodePng", "channels");
  if (options.palette && (image.channels != 3 || options.sixteen_bit))
    Die("EncodePng", "palette needs 8-bit RGB");

  // Palette indices, one byte per pixel, and the palette.
  std::vector<png_color> palette;
  std::vector<uint8_t> indices;
  if (options.palette) {
    std::map<std::tuple<uint8_t, uint8_t, uint8_t>, uint8_t> index_of;
    for (size_t i = 0; i < image.byte_size(); i += 3) {
      const auto color = std::make_tuple(image.data[i], image.data[i + 1], image.data[i + 2]);
      auto [it, added] = index_of.emplace(color, static_cast<uint8_t>(palette.size()));
      if (added) {
        if (palette.size() == 256) Die("EncodePng", "more than 256 colours for a palette");
        palette.push_back(png_color{image.data[i], image.data[i + 1], image.data[i + 2]});
      }
      indices.push_back(it->second);
    }
  }

  std::string encoded;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, OnPngError, OnPngWarning);
  png_infop info = png_create_info_struct(png);
  if (png == nullptr || info == nullptr) Die("EncodePng", "png_create_write_struct");
  png_set_write_fn(png, &encoded, AppendToString, Flush);
  const int bit_depth = options.sixteen_bit ? 16 : 8;
  png_set_IHDR(png, info, image.width, image.height, bit_depth,
               options.palette ? PNG_COLOR_TYPE_PALETTE : kColorTypes[image.channels],
               options.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (options.palette) {
    png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
    png_byte alpha[1] = {128};
    png_set_tRNS(png, info, alpha, 1, nullptr);
  }
  png_write_info(png, info);

  // One row at a time, in the layout the header says (16-bit big-endian).
  const size_t samples = options.palette ? image.width : image.row_bytes();
  std::vector<uint8_t> row(samples * (bit_depth / 8));
  const int passes = png_set_interlace_handling(png);
  for (int pass = 0; pass < passes; ++pass) {
    for (int y = 0; y < image.height; ++y) {
      const uint8_t* source =
          options.palette ? indices.data() + y * samples : image.data + y * image.row_bytes();
      for (size_t i = 0; i < samples; ++i) {
        if (options.sixteen_bit) {
          row[2 * i] = source[i];
          row[2 * i + 1] = source[i] ^ 0x5A;
        } else {
          row[i] = source[i];
        }
      }
      png_write_row(png, row.data());
    }
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return encoded;
}

std::vector<uint8_t> PhotoLikePixels(int height, int width, int channels, uint64_t seed) {
  SplitMix rng(seed);
  std::vector<double> values(static_cast<size_t>(height) * width * channels);
  // A smooth gradient per channel, in a random direction.
  for (int c = 0; c < channels; ++c) {
    const double dx = (rng.Below(201) - 100) / 100.0, dy = (rng.Below(201) - 100) / 100.0;
    const double base = rng.Below(128);
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        const double u = static_cast<double>(x) / width, v = static_cast<double>(y) / height;
        values[(static_cast<size_t>(y) * width + x) * channels + c] =
            base + 60 * (dx * u + dy * v) + 20 * std::sin(6 * u + 4 * v + c);
      }
    }
  }
  // Flat rectangles and discs with sharp edges.
  const int shapes = 6;
  for (int s = 0; s < shapes; ++s) {
    const int cy = rng.Below(height), cx = rng.Below(width);
    const int ry = 1 + rng.Below(std::max(1, height / 4)), rx = 1 + rng.Below(std::max(1, width / 4));
    const bool disc = s % 2 == 1;
    std::vector<int> color(channels);
    for (int& value : color) value = rng.Below(256);
    for (int y = std::max(0, cy - ry); y < std::min(height, cy + ry); ++y) {
      for (int x = std::max(0, cx - rx); x < std::min(width, cx + rx); ++x) {
        const double ny = static_cast<double>(y - cy) / ry, nx = static_cast<double>(x - cx) / rx;
        if (disc && nx * nx + ny * ny > 1) continue;
        for (int c = 0; c < channels; ++c)
          values[(static_cast<size_t>(y) * width + x) * channels + c] = color[c];
      }
    }
  }
  // Noise of +-8.
  std::vector<uint8_t> pixels(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double noisy = values[i] + rng.Below(17) - 8;
    pixels[i] = static_cast<uint8_t>(std::clamp(std::lround(noisy), 0L, 255L));
  }
  return pixels;
}

}  // namespace sluice::image
