#include "pipeline/image/crop_window.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

namespace sluice::image {
namespace {

constexpr double kScaleMin = 0.08, kScaleMax = 1.0;
constexpr double kRatioMin = 3.0 / 4.0, kRatioMax = 4.0 / 3.0;

TEST_CASE("Rng: xoshiro256** from SplitMix64, the same on every platform", "[image]") {
  // The first outputs for seed 0 (checked against an independent Python
  // transcription of SplitMix64 and xoshiro256**), pinned so that a change of generator (and
  // so of every crop in every job) cannot go unnoticed.
  Rng rng(0);
  const std::vector<uint64_t> first = {rng.Next(), rng.Next(), rng.Next()};
  CHECK(first == std::vector<uint64_t>{0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull, 0x1a5f849d4933e6e0ull});
  Rng again(0), other(1);
  CHECK(again.Next() == first[0]);
  CHECK(other.Next() != first[0]);
}

TEST_CASE("Rng: Uniform lies in 0 to 1 (1 excluded) and Below(n) below n", "[image]") {
  Rng rng(42);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.Uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    sum += u;
  }
  CHECK(std::fabs(sum / 100000 - 0.5) < 0.01);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{1000}, (int64_t{1} << 62) + 1,
                    int64_t{0x7FFFFFFFFFFFFFFF}}) {
    for (int i = 0; i < 10000; ++i) {
      const int64_t v = rng.Below(n);
      REQUIRE(v >= 0);
      REQUIRE(v < n);
    }
  }
  // Unbiased: six faces, 60000 throws, each within 5% of 10000.
  std::vector<int> faces(6);
  for (int i = 0; i < 60000; ++i) ++faces[rng.Below(6)];
  for (int f : faces) CHECK(std::abs(f - 10000) < 500);
}

TEST_CASE("RandomResizedCropWindow: a fixed seed gives fixed windows", "[image]") {
  Rng rng(2024);
  std::vector<CropWindow> windows;
  for (int i = 0; i < 5; ++i)
    windows.push_back(RandomResizedCropWindow(375, 500, kScaleMin, kScaleMax, kRatioMin, kRatioMax, rng));
  // Checked against torchvision's get_params transcribed in Python, fed by
  // the same generator; areas 0.13 to 0.74 of the image, ratios 0.87 to 1.28.
  const std::vector<CropWindow> expected = {
      {16, 52, 145, 170}, {37, 11, 309, 269}, {40, 28, 330, 423}, {188, 138, 143, 156}, {72, 0, 226, 215}};
  CHECK(windows == expected);
}

TEST_CASE("RandomResizedCropWindow: windows fit and follow scale and ratio", "[image]") {
  Rng sizes(7), rng(8), replay(8);
  int fallbacks = 0;
  for (int i = 0; i < 10000; ++i) {
    const int height = 250 + int(sizes.Below(251));
    const int width = 250 + int(sizes.Below(251));
    const CropWindow w =
        RandomResizedCropWindow(height, width, kScaleMin, kScaleMax, kRatioMin, kRatioMax, rng);
    INFO(height << "x" << width << " -> top " << w.top << " left " << w.left << " " << w.height << "x"
                << w.width);
    REQUIRE(w.top >= 0);
    REQUIRE(w.left >= 0);
    REQUIRE(w.height > 0);
    REQUIRE(w.width > 0);
    REQUIRE(w.top + w.height <= height);
    REQUIRE(w.left + w.width <= width);
    // Same seed, same windows.
    REQUIRE(RandomResizedCropWindow(height, width, kScaleMin, kScaleMax, kRatioMin, kRatioMax, replay) == w);
    // w and h were rounded from reals within half a pixel that met the bounds.
    const double area = double(height) * width;
    const bool in_bounds = (w.height - 0.5) * (w.width - 0.5) <= kScaleMax * area &&
                           (w.height + 0.5) * (w.width + 0.5) >= kScaleMin * area &&
                           (w.width - 0.5) / (w.height + 0.5) <= kRatioMax &&
                           (w.width + 0.5) / (w.height - 0.5) >= kRatioMin;
    if (!in_bounds) {
      // Only the fallback may break the bounds, and it is the central crop.
      ++fallbacks;
      CHECK(w.top == (height - w.height) / 2);
      CHECK(w.left == (width - w.width) / 2);
    }
  }
  CHECK(fallbacks < 10);
}

TEST_CASE("RandomResizedCropWindow: the fallback is central with the ratio clamped", "[image]") {
  Rng rng(1);
  // Every attempt is too wide (ratio >= 2 at ~the whole area of a square).
  CHECK(RandomResizedCropWindow(100, 100, 0.99, 1.0, 2.0, 3.0, rng) == CropWindow{25, 0, 50, 100});
  // Every attempt too tall: height kept, width = round(100 * 0.3).
  CHECK(RandomResizedCropWindow(100, 100, 0.99, 1.0, 0.2, 0.3, rng) == CropWindow{0, 35, 100, 30});
  // Ratio in range but the area never fits: the whole image.
  CHECK(RandomResizedCropWindow(10, 12, 1.5, 2.0, 0.5, 2.0, rng) == CropWindow{0, 0, 10, 12});
}

TEST_CASE("RandomCropWindow: every position, always inside", "[image]") {
  Rng rng(3);
  std::vector<int> seen(9);
  for (int i = 0; i < 2000; ++i) {
    const CropWindow w = RandomCropWindow(5, 5, 3, 3, rng);
    REQUIRE(w.height == 3);
    REQUIRE(w.width == 3);
    REQUIRE(w.top >= 0);
    REQUIRE(w.top <= 2);
    REQUIRE(w.left >= 0);
    REQUIRE(w.left <= 2);
    ++seen[w.top * 3 + w.left];
  }
  for (int count : seen) CHECK(count > 100);
  CHECK(RandomCropWindow(4, 6, 4, 6, rng) == CropWindow{0, 0, 4, 6});
}

TEST_CASE("CenterCropWindow rounds halves to even, as Python's round does", "[image]") {
  CHECK(CenterCropWindow(5, 5, 2, 2) == CropWindow{2, 2, 2, 2});                // round(1.5) = 2
  CHECK(CenterCropWindow(7, 7, 2, 2) == CropWindow{2, 2, 2, 2});                // round(2.5) = 2
  CHECK(CenterCropWindow(10, 10, 3, 3) == CropWindow{4, 4, 3, 3});              // round(3.5) = 4
  CHECK(CenterCropWindow(256, 341, 224, 224) == CropWindow{16, 58, 224, 224});  // round(58.5) = 58
  CHECK(CenterCropWindow(4, 4, 4, 4) == CropWindow{0, 0, 4, 4});
}

}  // namespace
}  // namespace sluice::image
