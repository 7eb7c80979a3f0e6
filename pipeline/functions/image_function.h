// What the image functions (image.cc, image_transforms.cc) share: which
// component they work on, the file an error names, list arguments, and
// the per-element seed of the random ones.
#ifndef SLUICE_PIPELINE_FUNCTIONS_IMAGE_FUNCTION_H_
#define SLUICE_PIPELINE_FUNCTIONS_IMAGE_FUNCTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/function.h"
#include "pipeline/image/image_view.h"

namespace sluice::internal {

// The component an image function works on: `component` (an index or a
// name) when given; else the one named "image" (image_folder's elements);
// else the only component.
class ImageComponent {
 public:
  static absl::StatusOr<ImageComponent> FromArgs(FunctionArgs& args);

  absl::StatusOr<int> Resolve(const std::vector<std::string>& names, size_t num_components) const;
  absl::StatusOr<int> Resolve(const Element& element) const;

  const std::string& function_name() const { return function_name_; }

 private:
  ImageComponent(std::string function_name, ComponentSelector selector)
      : function_name_(std::move(function_name)), selector_(std::move(selector)) {}

  std::string function_name_;
  ComponentSelector selector_;  // all(): the default choice above
};

// " ('root/cat/1.jpg')" when the element carries its file (a "path"
// string component, as image_folder's do), else "".
std::string FileOf(const Element& element);

// A list of numbers, or `fallback` when absent. InvalidArgument naming
// the function and key for anything else, or for a list whose length is
// not one of `lengths` (empty: any).
absl::StatusOr<std::vector<double>> GetNumbers(FunctionArgs& args, const std::string& key,
                                               std::optional<std::vector<double>> fallback,
                                               const std::vector<size_t>& lengths = {});

// [height, width] from `size`: a list of two positive ints, or one int
// for a square.
absl::StatusOr<std::pair<int, int>> GetSize(FunctionArgs& args, const std::string& key = "size");

// A random function's seed: the `seed` argument, or one drawn now, so that
// an unseeded pipeline is random per run.
absl::StatusOr<uint64_t> GetSeed(FunctionArgs& args);

// The seed of one element's draw: the function's seed mixed with a hash of
// the element's bytes (every component: an image_folder element's path
// and label too, so equal images in two files draw differently; a
// component past 8 KiB by its size and 4 KiB sampled evenly across it). It
// depends on nothing else (not the thread, not the order in which parallel
// calls finish, not the worker), so a seeded pipeline gives the same bytes
// with any num_parallel_calls, locally or through the service.
uint64_t ElementSeed(uint64_t seed, const Element& element);

// A uint8 [H, W, C] tensor as an image view; InvalidArgument otherwise.
absl::StatusOr<image::ImageView> ImageOf(const Tensor& tensor, const std::string& function,
                                         const Element& element);

// Replaces component `index` of `input` with `value`.
Element WithComponent(const Element& input, int index, Tensor value);

// The spec of component `index` replaced by `spec`.
ElementSpec WithComponentSpec(const ElementSpec& input, int index, TensorSpec spec);

}  // namespace sluice::internal

#endif  // SLUICE_PIPELINE_FUNCTIONS_IMAGE_FUNCTION_H_
