// Tests of the image element functions (image.cc, image_transforms.cc)
// through pipelines, on images the tests encode.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "pipeline/dataset.h"
#include "pipeline/functions/image_function.h"
#include "pipeline/image/test_images.h"
#include "pipeline/record_io.h"
#include "pipeline/yaml_loader.h"
#include "sluice/proto/example.pb.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::TempDir;

std::vector<uint8_t> Pixels(int height, int width, int channels, uint64_t seed = 1) {
  return image::PhotoLikePixels(height, width, channels, seed);
}

std::string Png(const std::vector<uint8_t>& pixels, int height, int width, int channels) {
  return image::EncodePng({pixels.data(), height, width, channels});
}

std::string Jpeg(const std::vector<uint8_t>& pixels, int height, int width, int channels, int quality = 90) {
  return image::EncodeJpeg({pixels.data(), height, width, channels}, quality);
}

// root/a/0.png (RGB 40x30), root/a/1.jpg (RGB 64x48), root/b/2.png (gray
// 20x10), root/b/3.jpg (corrupt).
struct Folder {
  TempDir dir;
  std::vector<uint8_t> rgb = Pixels(30, 40, 3);
  std::vector<uint8_t> gray = Pixels(10, 20, 1, 2);

  Folder() {
    std::filesystem::create_directories(dir.File("root/a"));
    std::filesystem::create_directories(dir.File("root/b"));
    testing::WriteFile(dir.File("root/a/0.png"), Png(rgb, 30, 40, 3));
    testing::WriteFile(dir.File("root/a/1.jpg"), Jpeg(Pixels(48, 64, 3, 3), 48, 64, 3));
    testing::WriteFile(dir.File("root/b/2.png"), Png(gray, 10, 20, 1));
    std::string corrupt = Jpeg(Pixels(48, 64, 3, 4), 48, 64, 3);
    corrupt.resize(corrupt.size() / 2);
    testing::WriteFile(dir.File("root/b/3.jpg"), corrupt);
  }
  std::string root() const { return dir.File("root"); }
};

std::vector<Element> Collect(const std::string& yaml) {
  absl::StatusOr<DatasetPtr> dataset = testing::DatasetFromYaml(yaml);
  INFO(dataset.status().ToString());
  REQUIRE(dataset.ok());
  absl::StatusOr<std::vector<Element>> elements = CollectElements(**dataset, IteratorContext{}, -1);
  INFO(elements.status().ToString());
  REQUIRE(elements.ok());
  return *elements;
}

absl::Status CollectError(const std::string& yaml) {
  absl::StatusOr<DatasetPtr> dataset = testing::DatasetFromYaml(yaml);
  if (!dataset.ok()) return dataset.status();
  return CollectElements(**dataset, IteratorContext{}, -1).status();
}

std::vector<uint8_t> BytesOf(const Tensor& tensor) {
  const auto* data = static_cast<const uint8_t*>(tensor.raw_data());
  return std::vector<uint8_t>(data, data + tensor.ByteSize());
}

TEST_CASE("decode_image decodes image_folder's images, and a corrupt one names its file", "[image]") {
  Folder folder;
  absl::Status corrupt =
      CollectError(absl::StrCat("- image_folder: ", folder.root(), "\n- map: decode_image\n"));
  CHECK(corrupt.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(corrupt.message()),
             Contains(absl::StrCat("decode_image: component 'image' ('", folder.root(), "/b/3.jpg'): ")));

  std::vector<Element> decoded = Collect(absl::StrCat(
      "- image_folder: ", folder.root(), "\n- map: decode_image\n- ignore_errors: {quiet: true}\n"));
  REQUIRE(decoded.size() == 3);
  CHECK(decoded[0].components[0].shape() == Shape{30, 40, 3});
  CHECK(BytesOf(decoded[0].components[0]) == folder.rgb);  // PNG: exact
  CHECK(decoded[1].components[0].shape() == Shape{48, 64, 3});
  CHECK(decoded[2].components[0].shape() == Shape{10, 20, 1});
  CHECK(BytesOf(decoded[2].components[0]) == folder.gray);
  CHECK(decoded[2].components[1].data<int64_t>()[0] == 1);  // label of b

  // channels: 3 makes the gray image RGB by repeating its value.
  std::vector<Element> rgb = Collect(absl::StrCat("- image_folder: ", folder.root(),
                                                  "\n- take: 3\n- map: {fn: decode_image, channels: 3}\n"));
  const Tensor& gray_as_rgb = rgb[2].components[0];
  REQUIRE(gray_as_rgb.shape() == Shape{10, 20, 3});
  const auto* pixels = static_cast<const uint8_t*>(gray_as_rgb.raw_data());
  CHECK((pixels[0] == folder.gray[0] && pixels[1] == folder.gray[0] && pixels[2] == folder.gray[0]));
}

TEST_CASE("decode_image refuses images over max_pixels before decoding", "[image]") {
  Folder folder;
  absl::Status big = CollectError(
      absl::StrCat("- image_folder: ", folder.root(), "\n- map: {fn: decode_image, max_pixels: 1000}\n"));
  CHECK(big.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(big.message()), Contains("max_pixels"));
  CHECK_THAT(std::string(CollectError("- range: 3\n- map: decode_image\n").message()),
             Contains("decode_image: needs an encoded image (string), got int64"));
  CHECK_THAT(
      std::string(CollectError("- from_tensors: abc\n- map: {fn: decode_image, channels: 2}\n").message()),
      Contains("decode_image: channels must be 0 (as stored), 1 or 3, got 2"));
}

TEST_CASE("Seeded random image functions depend only on the seed and the element", "[image]") {
  Folder folder;
  auto run = [&](int parallel, int seed) {
    return Collect(absl::StrCat("- image_folder: ", folder.root(), "\n- take: 3\n",
                                "- map: {fn: decode_and_random_crop, size: [24, 16], seed: ", seed,
                                ", num_parallel_calls: ", parallel, "}\n",
                                "- map: {fn: random_flip_left_right, seed: ", seed,
                                ", num_parallel_calls: ", parallel, "}\n"));
  };
  std::vector<Element> one = run(1, 7);
  std::vector<Element> eight = run(8, 7);
  std::vector<Element> other = run(1, 8);
  REQUIRE(one.size() == 3);
  bool any_differs = false;
  for (size_t i = 0; i < one.size(); ++i) {
    CHECK(one[i].components[0].shape() == Shape{24, 16, 3});
    CHECK(BytesOf(one[i].components[0]) == BytesOf(eight[i].components[0]));
    any_differs = any_differs || BytesOf(one[i].components[0]) != BytesOf(other[i].components[0]);
  }
  CHECK(any_differs);
}

TEST_CASE("An element's seed hashes small components whole and samples large ones", "[image]") {
  auto seed_of = [](const Tensor& t) { return internal::ElementSeed(7, Element({t})); };
  // 8 KiB: whole, so any byte counts.
  Tensor small(DType::kUInt8, {8192});
  const uint64_t small_seed = seed_of(small);
  small.mutable_data<uint8_t>()[5000] = 1;
  CHECK(seed_of(small) != small_seed);
  // 150,528 bytes (a 224x224x3 crop): the size and 64 blocks of 64 bytes,
  // the k-th at (150528 - 64) * k / 63.
  Tensor crop(DType::kUInt8, {224, 224, 3});
  const uint64_t crop_seed = seed_of(crop);
  CHECK(seed_of(crop) == crop_seed);
  Tensor sampled = crop.DeepCopy();
  sampled.mutable_data<uint8_t>()[(150528 - 64) * 10 / 63 + 63] = 1;  // in block 10
  CHECK(seed_of(sampled) != crop_seed);
  Tensor unsampled = crop.DeepCopy();
  unsampled.mutable_data<uint8_t>()[(150528 - 64) * 10 / 63 + 64] = 1;  // just past it
  CHECK(seed_of(unsampled) == crop_seed);
  CHECK(seed_of(Tensor(DType::kUInt8, {224, 224, 4})) != crop_seed);  // the size counts
  CHECK(internal::ElementSeed(8, Element({crop})) != crop_seed);
}

TEST_CASE("resize, crops and flips give the expected shapes and pixels", "[image]") {
  Folder folder;
  const std::string head =
      absl::StrCat("- image_folder: ", folder.root(), "\n- take: 1\n- map: decode_image\n");
  CHECK(Collect(head + "- map: {fn: resize, size: [15, 20]}\n")[0].components[0].shape() == Shape{15, 20, 3});
  CHECK(Collect(head + "- map: {fn: resize, size: 8, method: nearest}\n")[0].components[0].shape() ==
        Shape{8, 8, 3});
  const Tensor center = Collect(head + "- map: {fn: center_crop, size: [2, 3]}\n")[0].components[0];
  REQUIRE(center.shape() == Shape{2, 3, 3});
  // The 30x40 image's central 2x3 window starts at row 14, column 18.
  const auto* c = static_cast<const uint8_t*>(center.raw_data());
  CHECK(c[0] == folder.rgb[(14 * 40 + 18) * 3]);
  CHECK(c[3 * 3 + 2] == folder.rgb[(15 * 40 + 18) * 3 + 2]);
  CHECK_THAT(std::string(CollectError(head + "- map: {fn: center_crop, size: [31, 5]}\n").message()),
             Contains("center_crop: a 31x5 crop does not fit a 30x40 image"));
  // Over many images, about half are flipped; a flipped one is exactly
  // the mirror image.
  std::vector<Element> flips =
      Collect(absl::StrCat("- from_tensor_slices: {values: ", "[[[[1], [2], [3]]], [[[4], [5], [6]]]]",
                           ", dtype: uint8}\n- repeat: 100\n- enumerate\n- map: {fn: random_flip_left_right, "
                           "seed: 3, component: 1}\n"));
  int flipped = 0;
  for (const Element& e : flips) {
    const auto* p = static_cast<const uint8_t*>(e.components[1].raw_data());
    const bool mirror = p[0] > p[2];
    flipped += mirror;
    CHECK(p[1] == (p[0] + p[2]) / 2);
  }
  CHECK(flipped > 70);
  CHECK(flipped < 130);
}

TEST_CASE("normalize runs once per batch and gives CHW floats", "[image]") {
  std::vector<Element> out = Collect(
      "- from_tensors: {values: [[[0, 255], [51, 102]]], dtype: uint8}\n"  // 1x2x2 (H, W, C=2)
      "- repeat: 3\n"
      "- map: {fn: normalize, mean: [0.5, 0.0], std: [0.5, 0.2], layout: CHW}\n"
      "- batch: 2\n");
  REQUIRE(out.size() == 2);
  const Tensor& batch = out[0].components[0];
  REQUIRE(batch.dtype() == DType::kFloat32);
  REQUIRE(batch.shape() == Shape{2, 2, 1, 2});
  const float* v = batch.data<float>();
  CHECK(v[0] == Approx(-1.0f));  // (0 - 0.5) / 0.5, channel 0, pixel 0
  CHECK(v[1] == Approx(-0.6f));  // (51/255 - 0.5) / 0.5
  CHECK(v[2] == Approx(5.0f));   // (255/255 - 0) / 0.2, channel 1
  CHECK(v[3] == Approx(2.0f));   // (102/255) / 0.2
  CHECK(out[1].components[0].shape() == Shape{1, 2, 1, 2});
  absl::Status channels = CollectError(
      "- from_tensors: {values: [[[0, 1, 2]]], dtype: uint8}\n- map: {fn: normalize, mean: [0.5, 0.5], std: "
      "[1, 1]}\n");
  CHECK_THAT(
      std::string(channels.message()),
      Contains("normalize: 2 means and 2 stds for images of 3 channels; give one value, or one per channel"));
}

TEST_CASE("batch of images of different sizes points at resize", "[image]") {
  Folder folder;
  absl::Status mixed = CollectError(
      absl::StrCat("- image_folder: ", folder.root(), "\n- take: 2\n- map: decode_image\n- batch: 2\n"));
  CHECK(mixed.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(
      std::string(mixed.message()),
      Contains("batch: cannot batch component 0 ('image') of shapes [30, 40, 3] and [48, 64, 3]; resize the "
               "images to one size first (resize, center_crop, random_crop or decode_and_random_crop), or "
               "use padded_batch"));
}

TEST_CASE("ImageNet in TFRecord form feeds the image functions through parse_example", "[image]") {
  // As TensorFlow's official models write it: image/encoded and
  // image/class/label in a tf.train.Example per record.
  TempDir dir;
  const std::vector<uint8_t> pixels = Pixels(30, 40, 3, 9);
  const std::string png = Png(pixels, 30, 40, 3);
  {
    absl::StatusOr<std::unique_ptr<TFRecordWriter>> writer = TFRecordWriter::Create(dir.File("train-00000"));
    REQUIRE(writer.ok());
    for (int64_t label : {5, 9}) {
      proto::example::Example example;
      auto& features = *example.mutable_features()->mutable_feature();
      features["image/encoded"].mutable_bytes_list()->add_value(png);
      features["image/class/label"].mutable_int64_list()->add_value(label);
      REQUIRE((*writer)->Write(example.SerializeAsString()).ok());
    }
    REQUIRE((*writer)->Close().ok());
  }
  std::vector<Element> batches = Collect(
      absl::StrCat("- tfrecord: ", dir.File("train-00000"), "\n",
                   "- map: {fn: parse_example, features: {image/encoded: {dtype: string}, image/class/label: "
                   "{dtype: int64}}}\n",
                   "- map: {fn: decode_image, component: image/encoded}\n",
                   "- map: {fn: center_crop, size: [20, 20], component: image/encoded}\n", "- batch: 2\n"));
  REQUIRE(batches.size() == 1);
  const Element& batch = batches[0];
  REQUIRE(batch.named());
  CHECK(*batch.names == std::vector<std::string>{"image/class/label", "image/encoded"});
  CHECK(batch.components[0].data<int64_t>()[0] == 5);
  CHECK(batch.components[0].data<int64_t>()[1] == 9);
  CHECK(batch.components[1].shape() == Shape{2, 20, 20, 3});
  // The crop's first pixel is the image's pixel (5, 10).
  CHECK(static_cast<const uint8_t*>(batch.components[1].raw_data())[0] == pixels[(5 * 40 + 10) * 3]);
}

}  // namespace
}  // namespace sluice
