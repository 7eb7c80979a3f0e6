// Decoding with libjpeg-turbo (PNG with libpng: decode_png.cc). Both
// libraries report errors by longjmp,
// so every function that calls into them sets its jump point first and
// keeps only trivially destructible locals: the jump then skips no
// destructor. Buffers and statuses live in the callers, which run
// between those calls.
#include "pipeline/image/decode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

// libjpeg's headers need FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "absl/strings/str_cat.h"
#include "pipeline/image/decode_png.h"
#include "pipeline/image/resize.h"

namespace sluice::image {
namespace {

constexpr unsigned char kJpegMagic[] = {0xFF, 0xD8, 0xFF};
constexpr unsigned char kPngMagic[] = {0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A};

// Each scan of a progressive JPEG is a pass over the whole image, and
// nothing in the format bounds their number: a small file of thousands of
// tiny scans decodes for minutes. Encoders write a few dozen at most.
constexpr int kMaxJpegScans = 1000;

// libjpeg writes this many rows per read call at most (a small array of
// row pointers on the stack).
constexpr int kJpegRowsPerRead = 16;

bool StartsWith(std::string_view bytes, const unsigned char* magic, size_t size) {
  return bytes.size() >= size && std::memcmp(bytes.data(), magic, size) == 0;
}

absl::StatusOr<ImageFormat> DetectFormat(std::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("empty image (0 bytes)");
  if (StartsWith(bytes, kJpegMagic, sizeof(kJpegMagic))) return ImageFormat::kJpeg;
  if (StartsWith(bytes, kPngMagic, sizeof(kPngMagic))) return ImageFormat::kPng;
  std::string prefix;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 8); ++i) {
    absl::StrAppend(&prefix, i == 0 ? "" : " ",
                    absl::Hex(static_cast<unsigned char>(bytes[i]), absl::kZeroPad2));
  }
  return absl::InvalidArgumentError(absl::StrCat("not a JPEG or PNG image (starts with ", prefix, ")"));
}

absl::Status CheckChannelsOption(int channels) {
  if (channels == 0 || channels == 1 || channels == 3) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("channels must be 0 (as stored), 1 (gray) or 3 (RGB), got ", channels));
}

absl::Status CheckWindow(CropWindow window, int height, int width, int out_height, int out_width) {
  if (window.top < 0 || window.left < 0 || window.height <= 0 || window.width <= 0 ||
      window.height > height - window.top || window.width > width - window.left) {
    return absl::InvalidArgumentError(absl::StrCat("crop window (top ", window.top, ", left ", window.left,
                                                   ", height ", window.height, ", width ", window.width,
                                                   ") is not inside the ", height, "x", width, " image"));
  }
  if (out_height <= 0 || out_width <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("output size ", out_height, "x", out_width, " of the crop is empty"));
  }
  return absl::OkStatus();
}

// Resizes `window` of `image` to out_height x out_width (bilinear,
// antialiased), or copies it when the sizes agree.
void CropAndResize(ImageView image, CropWindow window, int out_height, int out_width, uint8_t* out) {
  const size_t window_row_bytes = static_cast<size_t>(window.width) * image.channels;
  const uint8_t* first = image.data + window.top * image.row_bytes() + window.left * image.channels;
  if (window.height == out_height && window.width == out_width) {
    for (int y = 0; y < window.height; ++y) {
      std::memcpy(out + y * window_row_bytes, first + y * image.row_bytes(), window_row_bytes);
    }
    return;
  }
  // Every byte is written: no zero-fill first (it was 3% of the ImageNet
  // pipeline's time, with the decoder's and the resize's buffers).
  std::unique_ptr<uint8_t[]> cropped;
  ImageView in{first, window.height, window.width, image.channels};
  if (window.width != image.width) {  // else the window's rows are contiguous already
    cropped = std::make_unique_for_overwrite<uint8_t[]>(window.height * window_row_bytes);
    for (int y = 0; y < window.height; ++y) {
      std::memcpy(cropped.get() + y * window_row_bytes, first + y * image.row_bytes(), window_row_bytes);
    }
    in.data = cropped.get();
  }
  Resize(in, MutableImageView{out, out_height, out_width, image.channels}, ResizeMethod::kBilinear,
         /*antialias=*/true);
}

// ---------------------------------------------------------------- JPEG

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg hands callbacks a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JumpWithJpegMessage(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void OnJpegError(j_common_ptr cinfo) { JumpWithJpegMessage(cinfo); }

// libjpeg reports corrupt data as a warning (level -1) and goes on with
// grey where it could not decode; such an image is refused. The warnings
// let through say nothing about the pixels (and libjpeg's guess at an
// unknown Adobe transform is the one Pillow gets too).
void OnJpegMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  const int code = cinfo->err->msg_code;
  if (code == JWRN_JFIF_MAJOR || code == JWRN_BOGUS_ICC || code == JWRN_ADOBE_XFORM) return;
  JumpWithJpegMessage(cinfo);
}

void OnJpegOutputMessage(j_common_ptr) {}  // never print to stderr

void OnJpegProgress(j_common_ptr cinfo) {
  const auto* decompress = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (decompress->input_scan_number <= kMaxJpegScans) return;
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  std::snprintf(err->message, sizeof(err->message), "more than %d progressive scans", kMaxJpegScans);
  std::longjmp(err->jump, 1);
}

// One libjpeg decompression of an image in memory. The methods that call
// libjpeg return false when it failed (Error() says why), after which only
// destruction is allowed.
class JpegDecoder {
 public:
  JpegDecoder() {
    cinfo_.err = jpeg_std_error(&err_.pub);
    err_.pub.error_exit = OnJpegError;
    err_.pub.emit_message = OnJpegMessage;
    err_.pub.output_message = OnJpegOutputMessage;
    progress_.progress_monitor = OnJpegProgress;
  }
  // Safe also when creation failed: cinfo_ starts zeroed, so mem is null.
  ~JpegDecoder() { jpeg_destroy_decompress(&cinfo_); }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  bool ReadHeader(std::string_view bytes) {
    if (setjmp(err_.jump)) return false;
    jpeg_create_decompress(&cinfo_);
    cinfo_.progress = &progress_;
    jpeg_mem_src(&cinfo_, reinterpret_cast<const unsigned char*>(bytes.data()),
                 static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&cinfo_, /*require_image=*/TRUE);
    return true;
  }

  // Pillow's settings, which are libjpeg's defaults (accurate integer
  // IDCT, fancy upsampling): the same pixels as Image.open().convert().
  bool Start(J_COLOR_SPACE out_color_space, unsigned scale_denom) {
    if (setjmp(err_.jump)) return false;
    cinfo_.out_color_space = out_color_space;
    cinfo_.scale_num = 1;
    cinfo_.scale_denom = scale_denom;
    cinfo_.dct_method = JDCT_ISLOW;
    cinfo_.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&cinfo_);
    return true;
  }

  // Widens [*xoffset, *xoffset + *width) to whole iMCU columns and decodes
  // only those from now on.
  bool CropColumns(JDIMENSION* xoffset, JDIMENSION* width) {
    if (setjmp(err_.jump)) return false;
    jpeg_crop_scanline(&cinfo_, xoffset, width);
    return true;
  }

  bool SkipRows(JDIMENSION rows) {
    if (setjmp(err_.jump)) return false;
    if (jpeg_skip_scanlines(&cinfo_, rows) != rows) {
      std::snprintf(err_.message, sizeof(err_.message), "could not skip %u rows", rows);
      return false;
    }
    return true;
  }

  // Reads `count` rows of output_width * output_components bytes to
  // `out`, `row_bytes` apart.
  bool ReadRows(uint8_t* out, size_t row_bytes, JDIMENSION count) {
    if (setjmp(err_.jump)) return false;
    JSAMPROW rows[kJpegRowsPerRead];
    JDIMENSION done = 0;
    while (done < count) {
      const JDIMENSION batch = std::min<JDIMENSION>(count - done, kJpegRowsPerRead);
      for (JDIMENSION i = 0; i < batch; ++i) rows[i] = out + (done + i) * row_bytes;
      const JDIMENSION read = jpeg_read_scanlines(&cinfo_, rows, batch);
      if (read == 0) {
        std::snprintf(err_.message, sizeof(err_.message), "no rows after row %u", cinfo_.output_scanline);
        return false;
      }
      done += read;
    }
    return true;
  }

  // Reads on to the end of the image, so that corrupt data after the last
  // row (typically "extraneous bytes", the sign of an earlier corruption)
  // is found too.
  bool Finish() {
    if (setjmp(err_.jump)) return false;
    jpeg_finish_decompress(&cinfo_);
    return true;
  }

  absl::Status Error() const {
    return absl::InvalidArgumentError(absl::StrCat("invalid JPEG: ", err_.message));
  }
  const jpeg_decompress_struct& cinfo() const { return cinfo_; }

 private:
  jpeg_decompress_struct cinfo_{};
  JpegErrorManager err_{};
  jpeg_progress_mgr progress_{};
};

bool IsCmyk(const jpeg_decompress_struct& cinfo) {
  return cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
}

absl::StatusOr<ImageInfo> JpegInfo(const jpeg_decompress_struct& cinfo) {
  ImageInfo info;
  info.format = ImageFormat::kJpeg;
  // libjpeg refuses sides over JPEG_MAX_DIMENSION (65500), so these fit.
  info.height = static_cast<int>(cinfo.image_height);
  info.width = static_cast<int>(cinfo.image_width);
  switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
      info.channels = 1;
      break;
    case JCS_YCbCr:
    case JCS_RGB:
    case JCS_CMYK:  // converted to RGB as Pillow does
    case JCS_YCCK:
      info.channels = 3;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported JPEG colour space (", cinfo.num_components, " components)"));
  }
  return info;
}

// CMYK JPEGs (Adobe's, with inverted values) become RGB as Pillow's
// open().convert("RGB") makes them: "CMYK;I" then cmyk2rgb, rounding
// included; gray is Pillow's convert("L") of that RGB.
void ConvertInvertedCmyk(const uint8_t* cmyk, size_t pixels, int out_channels, uint8_t* out) {
  const auto muldiv255 = [](int a, int b) {
    const int product = a * b + 128;
    return ((product >> 8) + product) >> 8;
  };
  for (size_t i = 0; i < pixels; ++i, cmyk += 4) {
    const int not_black = cmyk[3];  // 255 - K, with K = 255 - stored
    int rgb[3];
    for (int c = 0; c < 3; ++c) {
      rgb[c] = std::clamp(not_black - muldiv255(255 - cmyk[c], not_black), 0, 255);
    }
    if (out_channels == 3) {
      for (int c = 0; c < 3; ++c) *out++ = static_cast<uint8_t>(rgb[c]);
    } else {
      *out++ = static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
    }
  }
}

// The colour space libjpeg decodes to; CMYK is converted afterwards (libjpeg
// cannot make RGB or gray of it).
J_COLOR_SPACE OutColorSpace(const jpeg_decompress_struct& cinfo, int out_channels) {
  if (IsCmyk(cinfo)) return JCS_CMYK;
  return out_channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
}

// Reads the header and checks it and the options; decoder is then ready
// to Start.
absl::StatusOr<ImageInfo> OpenJpeg(JpegDecoder& decoder, std::string_view bytes,
                                   const DecodeOptions& options) {
  if (!decoder.ReadHeader(bytes)) return decoder.Error();
  absl::StatusOr<ImageInfo> info = JpegInfo(decoder.cinfo());
  if (!info.ok()) return info.status();
  if (absl::Status status = CheckImageSize(info->height, info->width, options); !status.ok()) return status;
  return info;
}

absl::Status CheckOutputShape(const jpeg_decompress_struct& cinfo, int height, int width, int components) {
  if (static_cast<int>(cinfo.output_height) == height && static_cast<int>(cinfo.output_width) == width &&
      cinfo.output_components == components) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("libjpeg decodes ", cinfo.output_height, "x", cinfo.output_width,
                                          "x", cinfo.output_components, ", expected ", height, "x", width,
                                          "x", components));
}

absl::Status DecodeJpeg(std::string_view bytes, const DecodeOptions& options,
                        const std::function<uint8_t*(int height, int width, int channels)>& allocate) {
  JpegDecoder decoder;
  absl::StatusOr<ImageInfo> info = OpenJpeg(decoder, bytes, options);
  if (!info.ok()) return info.status();
  const int channels = OutputChannels(*info, options);
  const bool cmyk = IsCmyk(decoder.cinfo());
  if (!decoder.Start(OutColorSpace(decoder.cinfo(), channels), 1)) return decoder.Error();
  const int components = cmyk ? 4 : channels;
  if (absl::Status status = CheckOutputShape(decoder.cinfo(), info->height, info->width, components);
      !status.ok()) {
    return status;
  }
  uint8_t* out = allocate(info->height, info->width, channels);
  if (out == nullptr) return absl::InternalError("DecodeImage: allocate returned no buffer");
  const size_t pixels = static_cast<size_t>(info->height) * info->width;
  if (!cmyk) {
    if (!decoder.ReadRows(out, static_cast<size_t>(info->width) * channels, info->height)) {
      return decoder.Error();
    }
  } else {
    std::vector<uint8_t> inverted_cmyk(pixels * 4);
    if (!decoder.ReadRows(inverted_cmyk.data(), static_cast<size_t>(info->width) * 4, info->height)) {
      return decoder.Error();
    }
    ConvertInvertedCmyk(inverted_cmyk.data(), pixels, channels, out);
  }
  if (!decoder.Finish()) return decoder.Error();
  return absl::OkStatus();
}

// The coarsest DCT scale (1/8, 1/4, 1/2) at which the window is still at
// least the output's size; 1 when the window is less than twice it.
unsigned ChooseScaleDenom(CropWindow window, int out_height, int out_width) {
  for (unsigned denom : {8u, 4u, 2u}) {
    if (window.height >= static_cast<int64_t>(out_height) * denom &&
        window.width >= static_cast<int64_t>(out_width) * denom) {
      return denom;
    }
  }
  return 1;
}

absl::Status DecodeJpegCropResize(std::string_view bytes, const DecodeOptions& options, CropWindow window,
                                  int out_height, int out_width, uint8_t* out) {
  JpegDecoder decoder;
  absl::StatusOr<ImageInfo> info = OpenJpeg(decoder, bytes, options);
  if (!info.ok()) return info.status();
  if (absl::Status status = CheckWindow(window, info->height, info->width, out_height, out_width);
      !status.ok()) {
    return status;
  }
  const int channels = OutputChannels(*info, options);
  const bool cmyk = IsCmyk(decoder.cinfo());
  const unsigned denom = ChooseScaleDenom(window, out_height, out_width);
  if (!decoder.Start(OutColorSpace(decoder.cinfo(), channels), denom)) return decoder.Error();
  const jpeg_decompress_struct& cinfo = decoder.cinfo();
  const int components = cinfo.output_components;

  // The window in the scaled image, widened to whole pixels.
  const auto scaled_end = [denom](int end, JDIMENSION limit) {
    return std::min<JDIMENSION>((static_cast<JDIMENSION>(end) + denom - 1) / denom, limit);
  };
  const JDIMENSION top = window.top / denom;
  const JDIMENSION bottom = scaled_end(window.top + window.height, cinfo.output_height);
  const JDIMENSION left = window.left / denom;
  const JDIMENSION right = scaled_end(window.left + window.width, cinfo.output_width);

  // Fancy upsampling of chroma weighs a neighbour on each side, which the
  // edges of a crop replace by themselves; a few more columns on each side
  // keep the window's pixels those of the whole image. jpeg_crop_scanline
  // then widens the left further, to whole iMCU columns.
  const JDIMENSION margin = cinfo.max_h_samp_factor;
  JDIMENSION decoded_left = left > margin ? left - margin : 0;
  JDIMENSION decoded_width = std::min(right + margin, cinfo.output_width) - decoded_left;
  if (decoded_width < cinfo.output_width) {
    if (!decoder.CropColumns(&decoded_left, &decoded_width)) return decoder.Error();
    if (decoded_width != cinfo.output_width || decoded_left > left || decoded_left + decoded_width < right) {
      return absl::InternalError("jpeg_crop_scanline did not cover the window");
    }
  } else {
    decoded_left = 0;
  }
  if (top > 0 && !decoder.SkipRows(top)) return decoder.Error();
  const JDIMENSION rows = bottom - top;
  // ReadRows writes every row or fails.
  auto decoded =
      std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(rows) * cinfo.output_width * components);
  if (!decoder.ReadRows(decoded.get(), static_cast<size_t>(cinfo.output_width) * components, rows)) {
    return decoder.Error();
  }
  // The rows below the window stay undecoded (no Finish): corrupt data
  // there goes unnoticed.
  ImageView decoded_view{decoded.get(), static_cast<int>(rows), static_cast<int>(cinfo.output_width),
                         components};
  std::vector<uint8_t> converted;
  if (cmyk) {
    converted.resize(static_cast<size_t>(rows) * cinfo.output_width * channels);
    ConvertInvertedCmyk(decoded.get(), static_cast<size_t>(rows) * cinfo.output_width, channels,
                        converted.data());
    decoded_view = ImageView{converted.data(), decoded_view.height, decoded_view.width, channels};
  }
  const CropWindow scaled_window{0, static_cast<int>(left - decoded_left), static_cast<int>(rows),
                                 static_cast<int>(right - left)};
  CropAndResize(decoded_view, scaled_window, out_height, out_width, out);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckImageSize(int64_t height, int64_t width, const DecodeOptions& options) {
  if (height <= 0 || width <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("image of ", height, "x", width, " pixels is empty"));
  }
  const int64_t pixels = height * width;
  if (pixels > options.max_pixels) {
    return absl::InvalidArgumentError(absl::StrCat("image of ", height, "x", width, " pixels (", pixels,
                                                   ") exceeds the limit of ", options.max_pixels,
                                                   " pixels (max_pixels)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageInfo> ReadImageInfo(std::string_view bytes, const DecodeOptions& options) {
  absl::StatusOr<ImageFormat> format = DetectFormat(bytes);
  if (!format.ok()) return format.status();
  if (*format == ImageFormat::kJpeg) {
    JpegDecoder decoder;
    return OpenJpeg(decoder, bytes, options);
  }
  return ReadPngInfo(bytes, options);
}

int OutputChannels(const ImageInfo& info, const DecodeOptions& options) {
  return options.channels == 0 ? info.channels : options.channels;
}

absl::Status DecodeImage(std::string_view bytes, const DecodeOptions& options,
                         const std::function<uint8_t*(int height, int width, int channels)>& allocate) {
  if (absl::Status status = CheckChannelsOption(options.channels); !status.ok()) return status;
  absl::StatusOr<ImageFormat> format = DetectFormat(bytes);
  if (!format.ok()) return format.status();
  if (*format == ImageFormat::kJpeg) return DecodeJpeg(bytes, options, allocate);
  return DecodePng(bytes, options, allocate);
}

absl::Status DecodeCropResize(std::string_view bytes, const DecodeOptions& options, CropWindow window,
                              int out_height, int out_width, uint8_t* out) {
  if (absl::Status status = CheckChannelsOption(options.channels); !status.ok()) return status;
  absl::StatusOr<ImageFormat> format = DetectFormat(bytes);
  if (!format.ok()) return format.status();
  if (*format == ImageFormat::kJpeg) {
    return DecodeJpegCropResize(bytes, options, window, out_height, out_width, out);
  }
  // Check the window before decoding anything.
  absl::StatusOr<ImageInfo> info = ReadImageInfo(bytes, options);
  if (!info.ok()) return info.status();
  if (absl::Status status = CheckWindow(window, info->height, info->width, out_height, out_width);
      !status.ok()) {
    return status;
  }
  std::vector<uint8_t> pixels;
  ImageView image;
  absl::Status status = DecodePng(bytes, options, [&](int height, int width, int channels) {
    pixels.resize(static_cast<size_t>(height) * width * channels);
    image = ImageView{pixels.data(), height, width, channels};
    return pixels.data();
  });
  if (!status.ok()) return status;
  CropAndResize(image, window, out_height, out_width, out);
  return absl::OkStatus();
}

}  // namespace sluice::image
