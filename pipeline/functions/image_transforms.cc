// The image transforms, documented in docs/pipeline.md: resize,
// center_crop, random_crop, random_resized_crop, random_flip_left_right,
// random_flip_up_down and normalize. Each works on a uint8 [H, W, C]
// component (the one named "image", the only one, or `component`);
// normalize takes a batch [N, H, W, C] too, so the builder runs it once per
// batch.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"
#include "pipeline/functions/image_function.h"
#include "pipeline/image/crop_window.h"
#include "pipeline/image/pixel_ops.h"
#include "pipeline/image/resize.h"

namespace sluice {
namespace {

using internal::ImageComponent;

// Makes the output image from the input (its tensor and a view of it), the
// element (for messages) and, for the random transforms, the element's
// seed.
using ImageTransform = std::function<absl::StatusOr<Tensor>(const Tensor& tensor, const image::ImageView& in,
                                                            const Element& element, uint64_t seed)>;

// An image transform of one component: checks the input spec, resolves
// the component, and hands the image to `transform`.
class ImageTransformFunction : public ElementFunction {
 public:
  ImageTransformFunction(ImageComponent component, std::optional<std::pair<int, int>> output_size,
                         std::optional<uint64_t> seed, ImageTransform transform)
      : component_(std::move(component)),
        output_size_(output_size),
        seed_(seed),
        transform_(std::move(transform)) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    absl::StatusOr<int> index = component_.Resolve(input.names, input.components.size());
    if (!index.ok()) return index.status();
    const TensorSpec& in = input.components[*index];
    const bool image_shape = in.shape.unknown_rank || in.shape.dims.size() == 3;
    if (in.dtype != DType::kUInt8 || !image_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(component_.function_name(),
                       ": needs a uint8 image [height, width, channels] (decode_image "
                       "makes one), got ",
                       in.DebugString()));
    }
    TensorSpec out = in;
    if (output_size_.has_value()) {
      const int64_t channels = in.shape.unknown_rank ? kUnknownDim : in.shape.dims[2];
      out.shape = PartialShape{{output_size_->first, output_size_->second, channels}};
    }
    return internal::WithComponentSpec(input, *index, std::move(out));
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    absl::StatusOr<int> index = component_.Resolve(input);
    if (!index.ok()) return index.status();
    const Tensor& tensor = input.components[*index];
    absl::StatusOr<image::ImageView> in = internal::ImageOf(tensor, component_.function_name(), input);
    if (!in.ok()) return in.status();
    const uint64_t seed = seed_.has_value() ? internal::ElementSeed(*seed_, input) : 0;
    absl::StatusOr<Tensor> out = transform_(tensor, *in, input, seed);
    if (!out.ok()) return out.status();
    return internal::WithComponent(input, *index, *std::move(out));
  }

 private:
  const ImageComponent component_;
  const std::optional<std::pair<int, int>> output_size_;
  const std::optional<uint64_t> seed_;  // set for the random transforms
  const ImageTransform transform_;
};

Tensor NewImage(int height, int width, int channels) {
  return Tensor::Uninitialized(DType::kUInt8, {height, width, channels});
}

image::MutableImageView ViewOf(Tensor& tensor) {
  return {static_cast<uint8_t*>(tensor.mutable_raw_data()), static_cast<int>(tensor.dim(0)),
          static_cast<int>(tensor.dim(1)), static_cast<int>(tensor.dim(2))};
}

absl::Status TooSmall(const std::string& function, const image::ImageView& in, int height, int width,
                      const Element& element) {
  return absl::InvalidArgumentError(absl::StrCat(function, ": a ", height, "x", width,
                                                 " crop does not fit a ", in.height, "x", in.width, " image",
                                                 internal::FileOf(element), "; resize it first"));
}

Tensor CropOf(const image::ImageView& in, image::CropWindow window) {
  Tensor out = NewImage(window.height, window.width, in.channels);
  image::Crop(in, window, ViewOf(out));
  return out;
}

absl::StatusOr<image::ResizeMethod> GetMethod(FunctionArgs& args) {
  absl::StatusOr<std::string> method = args.GetString("method", "bilinear");
  if (!method.ok()) return method.status();
  if (*method == "bilinear") return image::ResizeMethod::kBilinear;
  if (*method == "area") return image::ResizeMethod::kArea;
  if (*method == "nearest") return image::ResizeMethod::kNearest;
  return absl::InvalidArgumentError(
      absl::StrCat(args.function_name(), ": method '", *method, "' is not one of: bilinear, area, nearest"));
}

// The factory of a transform: its component, and what `make` builds from
// the rest of the arguments.
template <typename Make>
FunctionFactory TransformFactory(Make make) {
  return [make](FunctionArgs& args) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
    absl::StatusOr<ImageComponent> component = ImageComponent::FromArgs(args);
    if (!component.ok()) return component.status();
    return make(args, *std::move(component));
  };
}

using FunctionOrError = absl::StatusOr<std::unique_ptr<ElementFunction>>;

SLUICE_REGISTER_ELEMENT_FUNCTION(
    "resize", "resizes an image to size (bilinear with antialias, area or nearest)",
    TransformFactory([](FunctionArgs& args, ImageComponent component) -> FunctionOrError {
      absl::StatusOr<std::pair<int, int>> size = internal::GetSize(args);
      if (!size.ok()) return size.status();
      absl::StatusOr<image::ResizeMethod> method = GetMethod(args);
      if (!method.ok()) return method.status();
      absl::StatusOr<bool> antialias = args.GetBool("antialias", true);
      if (!antialias.ok()) return antialias.status();
      const auto [height, width] = *size;
      return std::make_unique<ImageTransformFunction>(
          std::move(component), *size, std::nullopt,
          [height = height, width = width, method = *method, antialias = *antialias](
              const Tensor&, const image::ImageView& in, const Element&, uint64_t) -> absl::StatusOr<Tensor> {
            Tensor out = NewImage(height, width, in.channels);
            image::Resize(in, ViewOf(out), method, antialias);
            return out;
          });
    }));

SLUICE_REGISTER_ELEMENT_FUNCTION(
    "center_crop", "the central window of size",
    TransformFactory([](FunctionArgs& args, ImageComponent component) -> FunctionOrError {
      absl::StatusOr<std::pair<int, int>> size = internal::GetSize(args);
      if (!size.ok()) return size.status();
      const auto [height, width] = *size;
      return std::make_unique<ImageTransformFunction>(
          std::move(component), *size, std::nullopt,
          [height = height, width = width](const Tensor&, const image::ImageView& in, const Element& element,
                                           uint64_t) -> absl::StatusOr<Tensor> {
            if (height > in.height || width > in.width)
              return TooSmall("center_crop", in, height, width, element);
            return CropOf(in, image::CenterCropWindow(in.height, in.width, height, width));
          });
    }));

SLUICE_REGISTER_ELEMENT_FUNCTION(
    "random_crop", "a window of size at a random place",
    TransformFactory([](FunctionArgs& args, ImageComponent component) -> FunctionOrError {
      absl::StatusOr<std::pair<int, int>> size = internal::GetSize(args);
      if (!size.ok()) return size.status();
      absl::StatusOr<uint64_t> seed = internal::GetSeed(args);
      if (!seed.ok()) return seed.status();
      const auto [height, width] = *size;
      return std::make_unique<ImageTransformFunction>(
          std::move(component), *size, *seed,
          [height = height, width = width](const Tensor&, const image::ImageView& in, const Element& element,
                                           uint64_t element_seed) -> absl::StatusOr<Tensor> {
            if (height > in.height || width > in.width)
              return TooSmall("random_crop", in, height, width, element);
            image::Rng rng(element_seed);
            return CropOf(in, image::RandomCropWindow(in.height, in.width, height, width, rng));
          });
    }));

SLUICE_REGISTER_ELEMENT_FUNCTION(
    "random_resized_crop", "RandomResizedCrop's window of a decoded image, resized to size (bilinear)",
    TransformFactory([](FunctionArgs& args, ImageComponent component) -> FunctionOrError {
      absl::StatusOr<std::pair<int, int>> size = internal::GetSize(args);
      if (!size.ok()) return size.status();
      absl::StatusOr<std::vector<double>> scale =
          internal::GetNumbers(args, "scale", std::vector<double>{0.08, 1.0}, {2});
      if (!scale.ok()) return scale.status();
      absl::StatusOr<std::vector<double>> ratio =
          internal::GetNumbers(args, "ratio", std::vector<double>{3.0 / 4.0, 4.0 / 3.0}, {2});
      if (!ratio.ok()) return ratio.status();
      if (!((*scale)[0] > 0 && (*scale)[0] <= (*scale)[1] && (*scale)[1] <= 1.0 && (*ratio)[0] > 0 &&
            (*ratio)[0] <= (*ratio)[1])) {
        return absl::InvalidArgumentError(
            "random_resized_crop: 'scale' must be [low, high] within (0, 1] and 'ratio' [low, high] above 0");
      }
      absl::StatusOr<uint64_t> seed = internal::GetSeed(args);
      if (!seed.ok()) return seed.status();
      const auto [height, width] = *size;
      return std::make_unique<ImageTransformFunction>(
          std::move(component), *size, *seed,
          [height = height, width = width, scale = *scale, ratio = *ratio](
              const Tensor&, const image::ImageView& in, const Element&,
              uint64_t element_seed) -> absl::StatusOr<Tensor> {
            image::Rng rng(element_seed);
            const image::CropWindow window = image::RandomResizedCropWindow(
                in.height, in.width, scale[0], scale[1], ratio[0], ratio[1], rng);
            // Resize reads a contiguous image; the window's rows are not.
            Tensor crop = CropOf(in, window);
            Tensor out = NewImage(height, width, in.channels);
            image::Resize(ViewOf(crop).view(), ViewOf(out), image::ResizeMethod::kBilinear, true);
            return out;
          });
    }));

// A flip that happens to half of the images, by the element's own seed.
FunctionFactory RandomFlip(bool left_right) {
  return TransformFactory([left_right](FunctionArgs& args, ImageComponent component) -> FunctionOrError {
    absl::StatusOr<uint64_t> seed = internal::GetSeed(args);
    if (!seed.ok()) return seed.status();
    return std::make_unique<ImageTransformFunction>(
        std::move(component), std::nullopt, *seed,
        [left_right](const Tensor& tensor, const image::ImageView& in, const Element&,
                     uint64_t element_seed) -> absl::StatusOr<Tensor> {
          image::Rng rng(element_seed);
          if (rng.Uniform() < 0.5) return tensor;  // unflipped: the same buffer
          Tensor out = NewImage(in.height, in.width, in.channels);
          if (left_right) {
            image::FlipLeftRight(in, ViewOf(out));
          } else {
            image::FlipUpDown(in, ViewOf(out));
          }
          return out;
        });
  });
}

SLUICE_REGISTER_ELEMENT_FUNCTION("random_flip_left_right", "mirrors half of the images left to right",
                                 RandomFlip(true));
SLUICE_REGISTER_ELEMENT_FUNCTION("random_flip_up_down", "mirrors half of the images top to bottom",
                                 RandomFlip(false));

// normalize: (pixel / 255 - mean) / std per channel, to float32, float16 or
// bfloat16, HWC or CHW, in one pass. It takes an image or a batch of them,
// and is elementwise, so the builder moves it after `batch`.
class NormalizeFunction : public ElementFunction {
 public:
  NormalizeFunction(ImageComponent component, std::vector<float> mean, std::vector<float> std, DType dtype,
                    image::Layout layout)
      : component_(std::move(component)),
        mean_(std::move(mean)),
        std_(std::move(std)),
        dtype_(dtype),
        layout_(layout) {}

  bool IsElementwise() const override { return true; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    absl::StatusOr<int> index = component_.Resolve(input.names, input.components.size());
    if (!index.ok()) return index.status();
    const TensorSpec& in = input.components[*index];
    const size_t rank = in.shape.unknown_rank ? 3 : in.shape.dims.size();
    if (in.dtype != DType::kUInt8 || (rank != 3 && rank != 4)) {
      return absl::InvalidArgumentError(
          absl::StrCat("normalize: needs uint8 images, [height, width, channels] or a batch of them, got ",
                       in.DebugString()));
    }
    TensorSpec out{in.shape, dtype_};
    if (!in.shape.unknown_rank) {
      const int64_t channels = in.shape.dims.back();
      if (channels != kUnknownDim && !ChannelsMatch(channels)) return WrongChannels(channels);
      if (layout_ == image::Layout::kCHW) {
        std::vector<int64_t>& dims = out.shape.dims;
        dims.insert(dims.end() - 3, channels);
        dims.pop_back();
      }
    }
    return internal::WithComponentSpec(input, *index, std::move(out));
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    absl::StatusOr<int> index = component_.Resolve(input);
    if (!index.ok()) return index.status();
    const Tensor& tensor = input.components[*index];
    const int rank = tensor.rank();
    if (tensor.dtype() != DType::kUInt8 || (rank != 3 && rank != 4)) {
      return absl::InvalidArgumentError(
          absl::StrCat("normalize: needs uint8 images, got ", DTypeName(tensor.dtype()),
                       ShapeDebugString(tensor.shape()), internal::FileOf(input)));
    }
    const int64_t count = rank == 4 ? tensor.dim(0) : 1;
    const image::ImageView one{static_cast<const uint8_t*>(tensor.raw_data()),
                               static_cast<int>(tensor.dim(rank - 3)), static_cast<int>(tensor.dim(rank - 2)),
                               static_cast<int>(tensor.dim(rank - 1))};
    if (!ChannelsMatch(one.channels)) return WrongChannels(one.channels);
    Shape shape = tensor.shape();
    if (layout_ == image::Layout::kCHW) {
      shape.insert(shape.end() - 3, one.channels);
      shape.pop_back();
    }
    Tensor out = Tensor::Uninitialized(dtype_, shape);
    image::Normalize(one, static_cast<int>(count), PerChannel(mean_, one.channels),
                     PerChannel(std_, one.channels),
                     dtype_ == DType::kFloat32   ? image::FloatType::kFloat32
                     : dtype_ == DType::kFloat16 ? image::FloatType::kFloat16
                                                 : image::FloatType::kBFloat16,
                     layout_, out.mutable_raw_data());
    return internal::WithComponent(input, *index, std::move(out));
  }

 private:
  // One value for all channels, or one per channel.
  bool ChannelsMatch(int64_t channels) const {
    return mean_.size() == std_.size() &&
           (mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == channels);
  }
  absl::Status WrongChannels(int64_t channels) const {
    return absl::InvalidArgumentError(absl::StrCat("normalize: ", mean_.size(), " means and ", std_.size(),
                                                   " stds for images of ", channels,
                                                   " channels; give one value, or one per channel"));
  }
  static std::vector<float> PerChannel(const std::vector<float>& values, int channels) {
    return values.size() == 1 ? std::vector<float>(channels, values[0]) : values;
  }

  const ImageComponent component_;
  const std::vector<float> mean_;
  const std::vector<float> std_;
  const DType dtype_;
  const image::Layout layout_;
};

SLUICE_REGISTER_ELEMENT_FUNCTION(
    "normalize", "(pixel / 255 - mean) / std per channel, to float32, float16 or bfloat16, HWC or CHW",
    TransformFactory([](FunctionArgs& args, ImageComponent component) -> FunctionOrError {
      absl::StatusOr<std::vector<double>> mean = internal::GetNumbers(args, "mean", std::vector<double>{0.0});
      if (!mean.ok()) return mean.status();
      absl::StatusOr<std::vector<double>> std = internal::GetNumbers(args, "std", std::vector<double>{1.0});
      if (!std.ok()) return std.status();
      if (mean->empty() || mean->size() != std->size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("normalize: 'mean' and 'std' need the same number of values, got ", mean->size(),
                         " and ", std->size()));
      }
      for (double value : *std) {
        if (!(value > 0))
          return absl::InvalidArgumentError(absl::StrCat("normalize: std values must be > 0, got ", value));
      }
      absl::StatusOr<DType> dtype = args.GetDType("dtype", DType::kFloat32);
      if (!dtype.ok()) return dtype.status();
      if (*dtype != DType::kFloat32 && *dtype != DType::kFloat16 && *dtype != DType::kBFloat16) {
        return absl::InvalidArgumentError(
            absl::StrCat("normalize: dtype must be float32, float16 or bfloat16, got ", DTypeName(*dtype)));
      }
      absl::StatusOr<std::string> layout = args.GetString("layout", "HWC");
      if (!layout.ok()) return layout.status();
      if (*layout != "HWC" && *layout != "CHW") {
        return absl::InvalidArgumentError(
            absl::StrCat("normalize: layout must be HWC or CHW, got '", *layout, "'"));
      }
      return std::make_unique<NormalizeFunction>(
          std::move(component), std::vector<float>(mean->begin(), mean->end()),
          std::vector<float>(std->begin(), std->end()), *dtype,
          *layout == "CHW" ? image::Layout::kCHW : image::Layout::kHWC);
    }));

}  // namespace
}  // namespace sluice
