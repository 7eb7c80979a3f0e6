// The image decoding functions, documented in docs/pipeline.md:
// decode_image and decode_and_random_crop (decode_image_test.cc has their
// tests).
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"
#include "pipeline/functions/image_function.h"
#include "pipeline/image/crop_window.h"
#include "pipeline/image/decode.h"

namespace sluice {
namespace {

using internal::FileOf;
using internal::ImageComponent;

// The encoded image of `element`'s component `index`: one string.
absl::StatusOr<std::string_view> EncodedOf(const Element& element, int index, const std::string& function) {
  const Tensor& input = element.components[index];
  if (input.dtype() != DType::kString || input.num_elements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(function, ": needs one encoded image (a string scalar), got ", DTypeName(input.dtype()),
                     ShapeDebugString(input.shape()), FileOf(element)));
  }
  return std::string_view(input.data<std::string>()[0]);
}

// Errors name the function, the component and the file.
absl::Status Named(const absl::Status& status, const std::string& function, const Element& element,
                   int index) {
  std::string component =
      element.named() ? absl::StrCat("'", (*element.names)[index], "'") : absl::StrCat(index);
  return absl::Status(status.code(), absl::StrCat(function, ": component ", component, FileOf(element), ": ",
                                                  status.message()));
}

absl::StatusOr<ElementSpec> DecodedSpec(const ElementSpec& input, const ImageComponent& component,
                                        TensorSpec decoded) {
  absl::StatusOr<int> index = component.Resolve(input.names, input.components.size());
  if (!index.ok()) return index.status();
  const TensorSpec& encoded = input.components[*index];
  if (encoded.dtype != DType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(
        component.function_name(), ": needs an encoded image (string), got ", DTypeName(encoded.dtype)));
  }
  return internal::WithComponentSpec(input, *index, std::move(decoded));
}

absl::StatusOr<image::DecodeOptions> DecodeOptionsFrom(FunctionArgs& args, int64_t default_channels) {
  image::DecodeOptions options;
  absl::StatusOr<int64_t> channels = args.GetInt("channels", default_channels);
  if (!channels.ok()) return channels.status();
  if (*channels != 0 && *channels != 1 && *channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.function_name(), ": channels must be 0 (as stored), 1 or 3, got ", *channels));
  }
  options.channels = static_cast<int>(*channels);
  absl::StatusOr<int64_t> max_pixels = args.GetInt("max_pixels", options.max_pixels);
  if (!max_pixels.ok()) return max_pixels.status();
  if (*max_pixels < 1) {
    return absl::InvalidArgumentError(absl::StrCat(args.function_name(), ": max_pixels must be positive"));
  }
  options.max_pixels = *max_pixels;
  return options;
}

class DecodeImageFunction : public ElementFunction {
 public:
  DecodeImageFunction(ImageComponent component, image::DecodeOptions options)
      : component_(std::move(component)), options_(options) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    PartialShape shape{{kUnknownDim, kUnknownDim, options_.channels == 0 ? kUnknownDim : options_.channels}};
    return DecodedSpec(input, component_, TensorSpec{shape, DType::kUInt8});
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    absl::StatusOr<int> index = component_.Resolve(input);
    if (!index.ok()) return index.status();
    absl::StatusOr<std::string_view> encoded = EncodedOf(input, *index, "decode_image");
    if (!encoded.ok()) return encoded.status();
    Tensor decoded;
    absl::Status status =
        image::DecodeImage(*encoded, options_, [&decoded](int height, int width, int channels) {
          decoded = Tensor::Uninitialized(DType::kUInt8, {height, width, channels});
          return static_cast<uint8_t*>(decoded.mutable_raw_data());
        });
    if (!status.ok()) return Named(status, "decode_image", input, *index);
    return internal::WithComponent(input, *index, std::move(decoded));
  }

 private:
  const ImageComponent component_;
  const image::DecodeOptions options_;
};

struct CropParams {
  int height = 0;
  int width = 0;
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  uint64_t seed = 0;
};

class DecodeAndRandomCropFunction : public ElementFunction {
 public:
  DecodeAndRandomCropFunction(ImageComponent component, image::DecodeOptions options, CropParams params)
      : component_(std::move(component)), options_(options), params_(params) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    PartialShape shape{
        {params_.height, params_.width, options_.channels == 0 ? kUnknownDim : options_.channels}};
    return DecodedSpec(input, component_, TensorSpec{shape, DType::kUInt8});
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    absl::StatusOr<int> index = component_.Resolve(input);
    if (!index.ok()) return index.status();
    const char* kName = "decode_and_random_crop";
    absl::StatusOr<std::string_view> encoded = EncodedOf(input, *index, kName);
    if (!encoded.ok()) return encoded.status();
    absl::StatusOr<image::ImageInfo> info = image::ReadImageInfo(*encoded, options_);
    if (!info.ok()) return Named(info.status(), kName, input, *index);
    image::Rng rng(internal::ElementSeed(params_.seed, input));
    const image::CropWindow window =
        image::RandomResizedCropWindow(info->height, info->width, params_.scale_min, params_.scale_max,
                                       params_.ratio_min, params_.ratio_max, rng);
    const int channels = image::OutputChannels(*info, options_);
    Tensor output = Tensor::Uninitialized(DType::kUInt8, {params_.height, params_.width, channels});
    absl::Status status = image::DecodeCropResize(*encoded, options_, window, params_.height, params_.width,
                                                  static_cast<uint8_t*>(output.mutable_raw_data()));
    if (!status.ok()) return Named(status, kName, input, *index);
    return internal::WithComponent(input, *index, std::move(output));
  }

 private:
  const ImageComponent component_;
  const image::DecodeOptions options_;
  const CropParams params_;
};

// [low, high] from a two-number list argument, checked.
absl::Status GetRange(FunctionArgs& args, const std::string& key, double low_bound, double* low,
                      double* high) {
  absl::StatusOr<std::vector<double>> range =
      internal::GetNumbers(args, key, std::vector<double>{*low, *high}, {2});
  if (!range.ok()) return range.status();
  if (!((*range)[0] > low_bound && (*range)[0] <= (*range)[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.function_name(), ": '", key, "' must be [low, high] with ", low_bound,
                     " < low <= high, got [", (*range)[0], ", ", (*range)[1], "]"));
  }
  *low = (*range)[0];
  *high = (*range)[1];
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ElementFunction>> MakeDecodeImage(FunctionArgs& args) {
  absl::StatusOr<ImageComponent> component = ImageComponent::FromArgs(args);
  if (!component.ok()) return component.status();
  absl::StatusOr<image::DecodeOptions> options = DecodeOptionsFrom(args, 0);
  if (!options.ok()) return options.status();
  return std::make_unique<DecodeImageFunction>(*std::move(component), *options);
}

absl::StatusOr<std::unique_ptr<ElementFunction>> MakeDecodeAndRandomCrop(FunctionArgs& args) {
  absl::StatusOr<ImageComponent> component = ImageComponent::FromArgs(args);
  if (!component.ok()) return component.status();
  absl::StatusOr<image::DecodeOptions> options = DecodeOptionsFrom(args, 3);
  if (!options.ok()) return options.status();
  CropParams params;
  absl::StatusOr<std::pair<int, int>> size = internal::GetSize(args);
  if (!size.ok()) return size.status();
  params.height = size->first;
  params.width = size->second;
  if (absl::Status s = GetRange(args, "scale", 0.0, &params.scale_min, &params.scale_max); !s.ok()) return s;
  if (params.scale_max > 1.0) {
    return absl::InvalidArgumentError("decode_and_random_crop: 'scale' must not exceed 1.0");
  }
  if (absl::Status s = GetRange(args, "ratio", 0.0, &params.ratio_min, &params.ratio_max); !s.ok()) return s;
  absl::StatusOr<uint64_t> seed = internal::GetSeed(args);
  if (!seed.ok()) return seed.status();
  params.seed = *seed;
  return std::make_unique<DecodeAndRandomCropFunction>(*std::move(component), *options, params);
}

SLUICE_REGISTER_ELEMENT_FUNCTION("decode_image", "decodes a JPEG or PNG to uint8 [height, width, channels]",
                                 MakeDecodeImage);
SLUICE_REGISTER_ELEMENT_FUNCTION(
    "decode_and_random_crop",
    "decodes only a random window of an image (RandomResizedCrop's) and resizes it to size",
    MakeDecodeAndRandomCrop);

}  // namespace
}  // namespace sluice
