#include "pipeline/image/decode.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "pipeline/image/resize.h"
#include "pipeline/image/test_images.h"

namespace sluice::image {
namespace {

struct Decoded {
  absl::Status status;
  std::vector<uint8_t> pixels;
  int height = 0;
  int width = 0;
  int channels = 0;
  bool allocated = false;

  ImageView view() const { return {pixels.data(), height, width, channels}; }
};

Decoded Decode(std::string_view bytes, const DecodeOptions& options = {}) {
  Decoded decoded;
  decoded.status = DecodeImage(bytes, options, [&](int height, int width, int channels) {
    decoded.allocated = true;
    decoded.height = height;
    decoded.width = width;
    decoded.channels = channels;
    decoded.pixels.resize(static_cast<size_t>(height) * width * channels);
    return decoded.pixels.data();
  });
  return decoded;
}

// Decodes and requires success.
Decoded DecodeOk(std::string_view bytes, const DecodeOptions& options = {}) {
  Decoded decoded = Decode(bytes, options);
  INFO(decoded.status.ToString());
  REQUIRE(decoded.status.ok());
  return decoded;
}

std::vector<uint8_t> DecodeCropResizeOk(std::string_view bytes, const DecodeOptions& options,
                                        CropWindow window, int out_height, int out_width, int channels) {
  std::vector<uint8_t> out(static_cast<size_t>(out_height) * out_width * channels);
  const absl::Status status = DecodeCropResize(bytes, options, window, out_height, out_width, out.data());
  INFO(status.ToString());
  REQUIRE(status.ok());
  return out;
}

std::vector<uint8_t> CropOf(ImageView image, CropWindow window) {
  std::vector<uint8_t> out;
  for (int y = window.top; y < window.top + window.height; ++y) {
    const uint8_t* row = image.data + y * image.row_bytes() + window.left * image.channels;
    out.insert(out.end(), row, row + static_cast<size_t>(window.width) * image.channels);
  }
  return out;
}

double MeanAbsoluteError(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  REQUIRE(a.size() == b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(static_cast<int>(a[i]) - b[i]);
  return sum / a.size();
}

int MaxAbsoluteDifference(const std::vector<uint8_t>& pixels, int value) {
  int max = 0;
  for (uint8_t p : pixels) max = std::max(max, std::abs(p - value));
  return max;
}

std::vector<uint8_t> Flat(int height, int width, std::vector<uint8_t> color) {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < height * width; ++i) pixels.insert(pixels.end(), color.begin(), color.end());
  return pixels;
}

// Each channel value of every pixel, as one of them.
std::vector<uint8_t> Channel(const std::vector<uint8_t>& pixels, int channels, int channel) {
  std::vector<uint8_t> out;
  for (size_t i = channel; i < pixels.size(); i += channels) out.push_back(pixels[i]);
  return out;
}

bool IsInvalidArgumentWith(const absl::Status& status, absl::string_view text) {
  INFO(status.ToString());
  return absl::IsInvalidArgument(status) && absl::StrContains(status.message(), text);
}

// The offset of the first marker `code` (its 0xFF) before the scan data.
size_t FindJpegMarker(const std::string& jpeg, uint8_t code) {
  size_t position = 2;  // after SOI
  while (position + 4 <= jpeg.size() && static_cast<uint8_t>(jpeg[position]) == 0xFF) {
    if (static_cast<uint8_t>(jpeg[position + 1]) == code) return position;
    REQUIRE(static_cast<uint8_t>(jpeg[position + 1]) != 0xDA);  // SOS: the header is over
    position +=
        2 + (static_cast<uint8_t>(jpeg[position + 2]) << 8 | static_cast<uint8_t>(jpeg[position + 3]));
  }
  FAIL("no marker " << int{code});
  return 0;
}

// The JPEG with SOF0 claiming another size (the scan data stays).
std::string WithJpegSize(std::string jpeg, int height, int width) {
  const size_t sof = FindJpegMarker(jpeg, 0xC0);
  jpeg[sof + 5] = static_cast<char>(height >> 8);
  jpeg[sof + 6] = static_cast<char>(height & 0xFF);
  jpeg[sof + 7] = static_cast<char>(width >> 8);
  jpeg[sof + 8] = static_cast<char>(width & 0xFF);
  return jpeg;
}

void PutBigEndian(std::string& bytes, size_t offset, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[offset + i] = static_cast<char>(value >> (24 - 8 * i));
}

// The PNG with IHDR (always first, at byte 8) claiming another size, its
// CRC made right again so that only the size is wrong.
std::string WithPngSize(std::string png, uint32_t height, uint32_t width) {
  REQUIRE(png.substr(12, 4) == "IHDR");
  PutBigEndian(png, 16, width);
  PutBigEndian(png, 20, height);
  const auto* type_and_data = reinterpret_cast<const Bytef*>(png.data() + 12);
  PutBigEndian(png, 29, static_cast<uint32_t>(crc32(0, type_and_data, 4 + 13)));
  return png;
}

ImageView View(const std::vector<uint8_t>& pixels, int height, int width, int channels) {
  return {pixels.data(), height, width, channels};
}

// ---------------------------------------------------------------- PNG

TEST_CASE("decode: PNG gray and RGB decode to exactly the encoded pixels", "[image]") {
  for (int channels : {1, 3}) {
    for (bool interlaced : {false, true}) {
      CAPTURE(channels, interlaced);
      const std::vector<uint8_t> pixels = PhotoLikePixels(37, 53, channels, 1);
      PngEncodeOptions options;
      options.interlaced = interlaced;
      const Decoded decoded = DecodeOk(EncodePng(View(pixels, 37, 53, channels), options));
      CHECK(decoded.height == 37);
      CHECK(decoded.width == 53);
      CHECK(decoded.channels == channels);
      CHECK(decoded.pixels == pixels);
    }
  }
}

TEST_CASE("decode: PNG alpha is dropped exactly (RGBA to RGB, gray+alpha to gray)", "[image]") {
  for (int channels : {2, 4}) {
    CAPTURE(channels);
    const std::vector<uint8_t> pixels = PhotoLikePixels(20, 30, channels, 2);
    const Decoded decoded = DecodeOk(EncodePng(View(pixels, 20, 30, channels)));
    REQUIRE(decoded.channels == channels - 1);
    std::vector<uint8_t> without_alpha;
    for (size_t i = 0; i < pixels.size(); ++i) {
      if (i % channels != static_cast<size_t>(channels - 1)) without_alpha.push_back(pixels[i]);
    }
    CHECK(decoded.pixels == without_alpha);
  }
}

TEST_CASE("decode: 16-bit PNG keeps the high byte of each sample", "[image]") {
  for (int channels : {1, 3, 4}) {
    CAPTURE(channels);
    const std::vector<uint8_t> pixels = PhotoLikePixels(16, 24, channels, 3);
    PngEncodeOptions options;
    options.sixteen_bit = true;
    const Decoded decoded = DecodeOk(EncodePng(View(pixels, 16, 24, channels), options));
    if (channels == 4) {
      std::vector<uint8_t> rgb;
      for (size_t i = 0; i < pixels.size(); ++i) {
        if (i % 4 != 3) rgb.push_back(pixels[i]);
      }
      CHECK(decoded.pixels == rgb);
    } else {
      CHECK(decoded.pixels == pixels);
    }
  }
}

TEST_CASE("decode: palette PNG decodes to RGB, its tRNS ignored", "[image]") {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < 8 * 12; ++i) {
    pixels.insert(pixels.end(), {static_cast<uint8_t>(i % 5 * 50), static_cast<uint8_t>(i % 3 * 100), 7});
  }
  PngEncodeOptions options;
  options.palette = true;
  const std::string png = EncodePng(View(pixels, 8, 12, 3), options);
  CHECK(DecodeOk(png).pixels == pixels);
  absl::StatusOr<ImageInfo> info = ReadImageInfo(png);
  REQUIRE(info.ok());
  CHECK(info->channels == 3);
}

// ---------------------------------------------------------------- JPEG

TEST_CASE("decode: a flat JPEG at quality 100 decodes within 2 of its colour", "[image]") {
  const Decoded rgb = DecodeOk(EncodeJpeg(View(Flat(16, 16, {200, 100, 50}), 16, 16, 3), 100));
  REQUIRE(rgb.channels == 3);
  CHECK(MaxAbsoluteDifference(Channel(rgb.pixels, 3, 0), 200) <= 2);
  CHECK(MaxAbsoluteDifference(Channel(rgb.pixels, 3, 1), 100) <= 2);
  CHECK(MaxAbsoluteDifference(Channel(rgb.pixels, 3, 2), 50) <= 2);

  const Decoded gray = DecodeOk(EncodeJpeg(View(Flat(16, 16, {77}), 16, 16, 1), 100));
  REQUIRE(gray.channels == 1);
  CHECK(MaxAbsoluteDifference(gray.pixels, 77) <= 2);
}

TEST_CASE("decode: CMYK JPEG becomes RGB as Pillow converts it", "[image]") {
  // Adobe's inverted CMYK: R = K' * C' / 255 of the stored values.
  const std::string jpeg = EncodeJpeg(View(Flat(16, 16, {200, 100, 50, 220}), 16, 16, 4), 100);
  absl::StatusOr<ImageInfo> info = ReadImageInfo(jpeg);
  REQUIRE(info.ok());
  CHECK(info->channels == 3);
  const Decoded rgb = DecodeOk(jpeg);
  REQUIRE(rgb.channels == 3);
  CHECK(MaxAbsoluteDifference(Channel(rgb.pixels, 3, 0), 173) <= 3);
  CHECK(MaxAbsoluteDifference(Channel(rgb.pixels, 3, 1), 86) <= 3);
  CHECK(MaxAbsoluteDifference(Channel(rgb.pixels, 3, 2), 43) <= 3);
  DecodeOptions gray;
  gray.channels = 1;
  // Pillow's luma of (173, 86, 43): 0.299 R + 0.587 G + 0.114 B.
  CHECK(MaxAbsoluteDifference(DecodeOk(jpeg, gray).pixels, 107) <= 3);
}

TEST_CASE("decode: ReadImageInfo reads format, size and channels", "[image]") {
  const std::vector<uint8_t> rgb = PhotoLikePixels(30, 50, 3, 4);
  const std::vector<uint8_t> gray = PhotoLikePixels(30, 50, 1, 4);
  const std::vector<uint8_t> rgba = PhotoLikePixels(30, 50, 4, 4);
  const std::vector<uint8_t> gray_alpha = PhotoLikePixels(30, 50, 2, 4);
  struct Case {
    std::string bytes;
    ImageFormat format;
    int channels;
  };
  const Case cases[] = {
      {EncodeJpeg(View(rgb, 30, 50, 3), 90), ImageFormat::kJpeg, 3},
      {EncodeJpeg(View(gray, 30, 50, 1), 90), ImageFormat::kJpeg, 1},
      {EncodePng(View(rgb, 30, 50, 3)), ImageFormat::kPng, 3},
      {EncodePng(View(gray, 30, 50, 1)), ImageFormat::kPng, 1},
      {EncodePng(View(rgba, 30, 50, 4)), ImageFormat::kPng, 3},
      {EncodePng(View(gray_alpha, 30, 50, 2)), ImageFormat::kPng, 1},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ImageInfo> info = ReadImageInfo(c.bytes);
    INFO(info.status().ToString());
    REQUIRE(info.ok());
    CHECK(info->format == c.format);
    CHECK(info->height == 30);
    CHECK(info->width == 50);
    CHECK(info->channels == c.channels);
    DecodeOptions options;
    CHECK(OutputChannels(*info, options) == c.channels);
    options.channels = 3;
    CHECK(OutputChannels(*info, options) == 3);
  }
}

TEST_CASE("decode: channels=1 makes gray of colour, channels=3 RGB of gray", "[image]") {
  DecodeOptions gray;
  gray.channels = 1;
  DecodeOptions rgb;
  rgb.channels = 3;

  // JPEG colour to gray is its luma channel: 0.299 R + 0.587 G + 0.114 B.
  const Decoded jpeg_gray = DecodeOk(EncodeJpeg(View(Flat(16, 16, {200, 100, 50}), 16, 16, 3), 100), gray);
  REQUIRE(jpeg_gray.channels == 1);
  CHECK(MaxAbsoluteDifference(jpeg_gray.pixels, 124) <= 2);

  // PNG colour to gray: equal channels stay exact, others weigh as BT.709.
  const Decoded png_gray_of_gray = DecodeOk(EncodePng(View(Flat(4, 4, {90, 90, 90}), 4, 4, 3)), gray);
  CHECK(png_gray_of_gray.pixels == Flat(4, 4, {90}));
  const Decoded png_gray = DecodeOk(EncodePng(View(Flat(4, 4, {200, 100, 50}), 4, 4, 3)), gray);
  REQUIRE(png_gray.channels == 1);
  CHECK(MaxAbsoluteDifference(png_gray.pixels, 117) <= 1);  // 0.2126 R + 0.7152 G + 0.0722 B

  // Gray to RGB repeats the value, for both formats.
  const std::vector<uint8_t> pixels = PhotoLikePixels(24, 40, 1, 5);
  const std::string jpeg = EncodeJpeg(View(pixels, 24, 40, 1), 90);
  const Decoded jpeg_as_stored = DecodeOk(jpeg);
  const Decoded jpeg_rgb = DecodeOk(jpeg, rgb);
  const Decoded png_rgb = DecodeOk(EncodePng(View(pixels, 24, 40, 1)), rgb);
  REQUIRE(jpeg_rgb.channels == 3);
  REQUIRE(png_rgb.channels == 3);
  for (int c = 0; c < 3; ++c) {
    CHECK(Channel(jpeg_rgb.pixels, 3, c) == jpeg_as_stored.pixels);
    CHECK(Channel(png_rgb.pixels, 3, c) == pixels);
  }
}

// ---------------------------------------------------------------- errors

TEST_CASE("decode: empty and unknown bytes are refused", "[image]") {
  CHECK(ReadImageInfo("").status() == absl::InvalidArgumentError("empty image (0 bytes)"));
  CHECK(Decode("").status == absl::InvalidArgumentError("empty image (0 bytes)"));
  const std::string gif("GIF89a\x01\x00\x01\x00", 10);
  CHECK(Decode(gif).status ==
        absl::InvalidArgumentError("not a JPEG or PNG image (starts with 47 49 46 38 39 61 01 00)"));
  CHECK(ReadImageInfo("\xFF\xD8").status() ==
        absl::InvalidArgumentError("not a JPEG or PNG image (starts with ff d8)"));

  std::string random;
  uint64_t state = 12345;
  for (int i = 0; i < 1000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    random.push_back(static_cast<char>(state >> 56));
  }
  const Decoded decoded = Decode(random);
  CHECK(IsInvalidArgumentWith(decoded.status, "not a JPEG or PNG image (starts with "));
  CHECK_FALSE(decoded.allocated);
}

TEST_CASE("decode: channels other than 0, 1 and 3 are refused", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(8, 8, 3, 6);
  const std::string png = EncodePng(View(pixels, 8, 8, 3));
  for (int channels : {-1, 2, 4}) {
    DecodeOptions options;
    options.channels = channels;
    CHECK(IsInvalidArgumentWith(Decode(png, options).status, absl::StrCat("got ", channels)));
    std::vector<uint8_t> out(64 * 4);
    CHECK(IsInvalidArgumentWith(DecodeCropResize(png, options, {0, 0, 8, 8}, 8, 8, out.data()),
                                absl::StrCat("got ", channels)));
  }
}

TEST_CASE("decode: truncated images are refused", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(64, 64, 3, 7);
  const std::string jpeg = EncodeJpeg(View(pixels, 64, 64, 3), 90);
  const std::string png = EncodePng(View(pixels, 64, 64, 3));
  CHECK(IsInvalidArgumentWith(Decode(jpeg.substr(0, jpeg.size() / 2)).status, "Premature end of JPEG file"));
  CHECK(IsInvalidArgumentWith(Decode(png.substr(0, png.size() / 2)).status, "invalid PNG: truncated"));
  // Only the last byte (of EOI) missing is still truncated.
  CHECK(IsInvalidArgumentWith(Decode(jpeg.substr(0, jpeg.size() - 1)).status, "invalid JPEG"));
}

TEST_CASE("decode: a corrupted byte in the JPEG scan data is refused", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(64, 64, 3, 1);
  const std::string jpeg = EncodeJpeg(View(pixels, 64, 64, 3), 90);
  const size_t sos = FindJpegMarker(jpeg, 0xDA);
  const size_t scan_begin =
      sos + 2 + (static_cast<uint8_t>(jpeg[sos + 2]) << 8 | static_cast<uint8_t>(jpeg[sos + 3]));
  const size_t middle = (scan_begin + jpeg.size() - 2) / 2;

  // Huffman data often resynchronises after a changed bit, so not every
  // corrupted byte can be noticed (by any decoder); this one desynchronises
  // the rest, which libjpeg reports only at the end (extraneous bytes).
  std::string corrupted = jpeg;
  corrupted[middle] = static_cast<char>(corrupted[middle] ^ 0x55);
  CHECK(IsInvalidArgumentWith(Decode(corrupted).status, "Corrupt JPEG data"));

  // A run of 1-bits (stuffed 0xFF bytes) is no Huffman code at all, where
  // it is.
  corrupted = jpeg;
  for (size_t i = 0; i < 16; i += 2) corrupted.replace(middle + i, 2, std::string("\xFF\x00", 2));
  CHECK(IsInvalidArgumentWith(Decode(corrupted).status, "Corrupt JPEG data"));
}

TEST_CASE("decode: images over max_pixels are refused before decoding", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(16, 16, 3, 8);
  const std::string bomb_message =
      "image of 30000x30000 pixels (900000000) exceeds the limit of 100000000 pixels (max_pixels)";
  const std::string jpeg_bomb = WithJpegSize(EncodeJpeg(View(pixels, 16, 16, 3), 90), 30000, 30000);
  const std::string png_bomb = WithPngSize(EncodePng(View(pixels, 16, 16, 3)), 30000, 30000);
  for (const std::string& bomb : {jpeg_bomb, png_bomb}) {
    CHECK(ReadImageInfo(bomb).status() == absl::InvalidArgumentError(bomb_message));
    const Decoded decoded = Decode(bomb);
    CHECK(decoded.status == absl::InvalidArgumentError(bomb_message));
    CHECK_FALSE(decoded.allocated);
    std::vector<uint8_t> out(8 * 8 * 3);
    CHECK(DecodeCropResize(bomb, {}, {0, 0, 100, 100}, 8, 8, out.data()) ==
          absl::InvalidArgumentError(bomb_message));
  }

  // The limit is an option.
  const std::vector<uint8_t> hundred = PhotoLikePixels(100, 100, 1, 9);
  for (const std::string& image :
       {EncodeJpeg(View(hundred, 100, 100, 1), 90), EncodePng(View(hundred, 100, 100, 1))}) {
    DecodeOptions options;
    options.max_pixels = 9999;
    CHECK(Decode(image, options).status ==
          absl::InvalidArgumentError(
              "image of 100x100 pixels (10000) exceeds the limit of 9999 pixels (max_pixels)"));
    options.max_pixels = 10000;
    CHECK(Decode(image, options).status.ok());
  }
}

TEST_CASE("decode: a PNG of width 0 is refused", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(4, 4, 3, 10);
  const absl::Status status = ReadImageInfo(WithPngSize(EncodePng(View(pixels, 4, 4, 3)), 4, 0)).status();
  CHECK(IsInvalidArgumentWith(status, "invalid PNG"));
}

TEST_CASE("decode: every truncation of small images is refused without crashing", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(24, 40, 3, 11);
  JpegEncodeOptions progressive;
  progressive.progressive = true;
  for (const std::string& jpeg :
       {EncodeJpeg(View(pixels, 24, 40, 3), 90), EncodeJpeg(View(pixels, 24, 40, 3), progressive)}) {
    for (size_t size = 0; size < jpeg.size(); ++size) {
      CAPTURE(size);
      CHECK(absl::IsInvalidArgument(Decode(jpeg.substr(0, size)).status));
      // A window needs the data up to its last row only.
      std::vector<uint8_t> out(10 * 10 * 3);
      const absl::Status status =
          DecodeCropResize(jpeg.substr(0, size), {}, {3, 5, 10, 20}, 10, 10, out.data());
      if (size <= jpeg.size() / 3) CHECK(absl::IsInvalidArgument(status));
    }
  }
  PngEncodeOptions interlaced;
  interlaced.interlaced = true;
  for (const std::string& png :
       {EncodePng(View(pixels, 24, 40, 3)), EncodePng(View(pixels, 24, 40, 3), interlaced)}) {
    // The chunks after the image data (IEND: 12 bytes) are not needed.
    for (size_t size = 0; size + 12 < png.size(); ++size) {
      CAPTURE(size);
      CHECK(absl::IsInvalidArgument(Decode(png.substr(0, size)).status));
    }
    CHECK(Decode(png.substr(0, png.size() - 12)).status.ok());
  }
}

TEST_CASE("decode: randomly corrupted images decode or are refused, never crash", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(24, 40, 3, 17);
  JpegEncodeOptions progressive;
  progressive.progressive = true;
  PngEncodeOptions interlaced;
  interlaced.interlaced = true;
  const std::string images[] = {
      EncodeJpeg(View(pixels, 24, 40, 3), 90), EncodeJpeg(View(pixels, 24, 40, 3), progressive),
      EncodePng(View(pixels, 24, 40, 3)), EncodePng(View(pixels, 24, 40, 3), interlaced)};
  uint64_t state = 99;
  const auto next = [&state](size_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>((state >> 33) % n);
  };
  for (const std::string& image : images) {
    for (int trial = 0; trial < 300; ++trial) {
      std::string corrupted = image;
      for (size_t changes = 1 + next(4); changes > 0; --changes) {
        corrupted[next(corrupted.size())] = static_cast<char>(next(256));
      }
      CAPTURE(trial);
      const absl::Status info = ReadImageInfo(corrupted).status();
      CHECK((info.ok() || absl::IsInvalidArgument(info)));
      const absl::Status decoded = Decode(corrupted).status;
      CHECK((decoded.ok() || absl::IsInvalidArgument(decoded)));
      std::vector<uint8_t> out(12 * 12 * 3);
      const absl::Status cropped = DecodeCropResize(corrupted, {}, {4, 6, 16, 24}, 12, 12, out.data());
      CHECK((cropped.ok() || absl::IsInvalidArgument(cropped)));
    }
  }
}

// ---------------------------------------------------------------- DecodeCropResize

TEST_CASE("decode: DecodeCropResize refuses windows outside the image", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(40, 60, 3, 12);
  std::vector<uint8_t> out(10 * 10 * 3);
  for (const std::string& image :
       {EncodeJpeg(View(pixels, 40, 60, 3), 90), EncodePng(View(pixels, 40, 60, 3))}) {
    CHECK(DecodeCropResize(image, {}, {30, 50, 20, 20}, 10, 10, out.data()) ==
          absl::InvalidArgumentError(
              "crop window (top 30, left 50, height 20, width 20) is not inside the 40x60 image"));
    for (CropWindow window :
         {CropWindow{-1, 0, 10, 10}, CropWindow{0, 0, 0, 10}, CropWindow{0, 51, 10, 10}}) {
      CHECK(IsInvalidArgumentWith(DecodeCropResize(image, {}, window, 10, 10, out.data()),
                                  "is not inside the 40x60 image"));
    }
    CHECK(
        IsInvalidArgumentWith(DecodeCropResize(image, {}, {0, 0, 10, 10}, 0, 10, out.data()), "output size"));
  }
}

TEST_CASE("decode: DecodeCropResize of a PNG is the crop of its decoding", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(50, 70, 3, 13);
  const std::string png = EncodePng(View(pixels, 50, 70, 3));
  for (CropWindow window : {CropWindow{5, 7, 30, 40}, CropWindow{0, 0, 50, 70}, CropWindow{49, 69, 1, 1}}) {
    CAPTURE(window.top, window.left, window.height, window.width);
    CHECK(DecodeCropResizeOk(png, {}, window, window.height, window.width, 3) ==
          CropOf(View(pixels, 50, 70, 3), window));
  }
  // Resized: the same Resize of that crop.
  const CropWindow window{10, 20, 40, 40};
  const std::vector<uint8_t> crop = CropOf(View(pixels, 50, 70, 3), window);
  std::vector<uint8_t> expected(16 * 16 * 3);
  Resize(View(crop, 40, 40, 3), MutableImageView{expected.data(), 16, 16, 3}, ResizeMethod::kBilinear, true);
  CHECK(DecodeCropResizeOk(png, {}, window, 16, 16, 3) == expected);
}

TEST_CASE("decode: DecodeCropResize of a JPEG window is close to the crop of the whole", "[image]") {
  const std::vector<uint8_t> rgb = PhotoLikePixels(256, 256, 3, 14);
  const std::vector<uint8_t> gray = PhotoLikePixels(256, 256, 1, 14);
  std::vector<std::pair<std::string, int>> jpegs;  // with their channels
  for (JpegSubsampling subsampling : {JpegSubsampling::k444, JpegSubsampling::k422, JpegSubsampling::k420}) {
    for (bool progressive : {false, true}) {
      JpegEncodeOptions options;
      options.subsampling = subsampling;
      options.progressive = progressive;
      jpegs.emplace_back(EncodeJpeg(View(rgb, 256, 256, 3), options), 3);
    }
  }
  jpegs.emplace_back(EncodeJpeg(View(gray, 256, 256, 1), 95), 1);
  jpegs.emplace_back(EncodeJpeg(View(Flat(256, 256, {40, 90, 160, 30}), 256, 256, 4), 95), 3);  // CMYK

  const CropWindow windows[] = {{37, 21, 150, 170}, {0, 0, 256, 256}, {128, 200, 128, 56}, {5, 99, 1, 1}};
  for (size_t i = 0; i < jpegs.size(); ++i) {
    const auto& [jpeg, channels] = jpegs[i];
    const Decoded whole = DecodeOk(jpeg);
    for (const CropWindow& window : windows) {
      CAPTURE(i, window.top, window.left, window.height, window.width);
      const std::vector<uint8_t> partial =
          DecodeCropResizeOk(jpeg, {}, window, window.height, window.width, channels);
      // Whole iMCU columns and a margin for the upsampling of chroma make
      // it exact with libjpeg-turbo 2.1; the bound allows for other builds.
      CHECK(MeanAbsoluteError(partial, CropOf(whole.view(), window)) <= 2.0);
      CHECK(partial == CropOf(whole.view(), window));
    }
  }
}

TEST_CASE("decode: DecodeCropResize shrinking a JPEG window decodes it at a DCT scale", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(256, 256, 3, 15);
  const std::string jpeg = EncodeJpeg(View(pixels, 256, 256, 3), 95);
  const Decoded whole = DecodeOk(jpeg);
  // 200x200 to 50x50 decodes at 1/4, then 1/2, 1/8 and 1 (growing). The
  // window's edges widen to whole pixels of the scaled image, which moves
  // them by up to a scaled pixel: 1/8's window is aligned to keep this test
  // about the scaling.
  struct Case {
    CropWindow window;
    int out_height, out_width;
  };
  for (const Case& c : {Case{{20, 33, 200, 200}, 50, 50}, Case{{0, 0, 256, 256}, 100, 120},
                        Case{{16, 8, 176, 240}, 22, 30}, Case{{50, 50, 100, 100}, 150, 150}}) {
    CAPTURE(c.window.top, c.window.left, c.out_height, c.out_width);
    const std::vector<uint8_t> crop = CropOf(whole.view(), c.window);
    std::vector<uint8_t> expected(static_cast<size_t>(c.out_height) * c.out_width * 3);
    Resize(View(crop, c.window.height, c.window.width, 3),
           MutableImageView{expected.data(), c.out_height, c.out_width, 3}, ResizeMethod::kBilinear, true);
    const std::vector<uint8_t> partial = DecodeCropResizeOk(jpeg, {}, c.window, c.out_height, c.out_width, 3);
    CHECK(MeanAbsoluteError(partial, expected) <= 3.0);
  }
}

TEST_CASE("decode: DecodeCropResize converts channels on the way", "[image]") {
  const std::vector<uint8_t> pixels = PhotoLikePixels(64, 64, 3, 16);
  DecodeOptions gray;
  gray.channels = 1;
  const CropWindow window{8, 16, 40, 32};
  for (const std::string& image :
       {EncodeJpeg(View(pixels, 64, 64, 3), 95), EncodePng(View(pixels, 64, 64, 3))}) {
    const Decoded whole = DecodeOk(image, gray);
    CHECK(MeanAbsoluteError(DecodeCropResizeOk(image, gray, window, 40, 32, 1),
                            CropOf(whole.view(), window)) <= 2.0);
  }
}

}  // namespace
}  // namespace sluice::image
