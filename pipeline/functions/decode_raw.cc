// The `decode_raw` element function, documented in docs/pipeline.md.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"
#include "pipeline/functions/componentwise.h"

namespace sluice {
namespace {

using internal::ComponentwiseFunction;

// decode_raw: each string's bytes reinterpreted as a vector of `dtype`.
class DecodeRawFunction : public ComponentwiseFunction {
 public:
  DecodeRawFunction(ComponentSelector selector, DType dtype, bool little_endian)
      : ComponentwiseFunction(std::move(selector)), dtype_(dtype), little_endian_(little_endian) {}

  // Rows of one batch may have different lengths; only separate rows may.
  bool IsElementwise() const override { return false; }

 protected:
  absl::StatusOr<TensorSpec> TransformSpec(const TensorSpec& input) const override {
    if (input.dtype != DType::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat("decode_raw: needs a string component, got ", DTypeName(input.dtype)));
    }
    PartialShape shape = input.shape;
    if (!shape.unknown_rank) shape.dims.push_back(kUnknownDim);
    return TensorSpec{shape, dtype_};
  }

  absl::StatusOr<Tensor> Transform(const Tensor& input) const override {
    if (input.dtype() != DType::kString) {
      return absl::InvalidArgumentError("decode_raw: needs a string component");
    }
    const size_t width = DTypeSize(dtype_);
    const auto strings = input.values<std::string>();
    const size_t length = strings.empty() ? 0 : strings[0].size();
    for (const std::string& s : strings) {
      if (s.size() != length) {
        return absl::InvalidArgumentError(absl::StrCat(
            "decode_raw: strings of one tensor must have equal lengths, got ", length, " and ", s.size()));
      }
    }
    if (length % width != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "decode_raw: ", length, " bytes is not a multiple of the ", width, "-byte ", DTypeName(dtype_)));
    }
    Shape shape = input.shape();
    shape.push_back(static_cast<int64_t>(length / width));
    Tensor output(dtype_, shape);
    char* out = static_cast<char*>(output.mutable_raw_data());
    for (size_t i = 0; i < strings.size(); ++i) {
      std::memcpy(out + i * length, strings[i].data(), length);
    }
    if (!little_endian_ && width > 1) {
      for (size_t offset = 0; offset < output.ByteSize(); offset += width) {
        std::reverse(out + offset, out + offset + width);
      }
    }
    return output;
  }

 private:
  const DType dtype_;
  const bool little_endian_;
};

SLUICE_REGISTER_ELEMENT_FUNCTION(
    "decode_raw", "reinterprets string bytes as a vector of dtype",
    [](FunctionArgs& args) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
      absl::StatusOr<ComponentSelector> selector = ComponentSelector::FromArgs(args);
      if (!selector.ok()) return selector.status();
      absl::StatusOr<DType> dtype = args.GetDType("dtype");
      if (!dtype.ok()) return dtype.status();
      if (*dtype == DType::kString) {
        return absl::InvalidArgumentError("decode_raw: dtype must be numeric, not string");
      }
      absl::StatusOr<bool> little_endian = args.GetBool("little_endian", true);
      if (!little_endian.ok()) return little_endian.status();
      return std::make_unique<DecodeRawFunction>(*std::move(selector), *dtype, *little_endian);
    });

}  // namespace
}  // namespace sluice
