// An example plugin: a shared library that adds element functions to the
// registry when it is loaded. Build yours the same way (a MODULE library
// linked against sluice::core) and list it in a pipeline:
//
//   plugins: [libsluice_example_plugin.so]
//   pipeline:
//     - range: 5
//     - map: {fn: example.affine, scale: 3, offset: 1}
//
// It registers `example.affine` (x * scale + offset on every integer or
// float component) and `example.is_even` (a predicate for filter).
#include <memory>

#include "pipeline/function.h"

namespace {

class Affine : public sluice::ElementFunction {
 public:
  Affine(double scale, double offset) : scale_(scale), offset_(offset) {}

  absl::StatusOr<sluice::ElementSpec> OutputSpec(const sluice::ElementSpec& input) const override {
    for (const sluice::TensorSpec& c : input.components) {
      if (c.dtype != sluice::DType::kInt64 && c.dtype != sluice::DType::kFloat32 &&
          c.dtype != sluice::DType::kFloat64) {
        return absl::InvalidArgumentError("example.affine: needs int64, float32 or float64 components");
      }
    }
    return input;
  }

  absl::StatusOr<sluice::Element> Call(const sluice::Element& input) const override {
    sluice::Element output = input;
    for (sluice::Tensor& t : output.components) {
      sluice::Tensor result(t.dtype(), t.shape());
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const double y = sluice::NumericValueAsDouble(t, i) * scale_ + offset_;
        switch (t.dtype()) {
          case sluice::DType::kInt64:
            result.mutable_data<int64_t>()[i] = static_cast<int64_t>(y);
            break;
          case sluice::DType::kFloat32:
            result.mutable_data<float>()[i] = static_cast<float>(y);
            break;
          default:
            result.mutable_data<double>()[i] = y;
        }
      }
      t = std::move(result);
    }
    return output;
  }

 private:
  const double scale_;
  const double offset_;
};

class IsEven : public sluice::ElementFunction {
 public:
  absl::StatusOr<sluice::ElementSpec> OutputSpec(const sluice::ElementSpec& input) const override {
    if (input.components.size() != 1 || input.components[0].dtype != sluice::DType::kInt64) {
      return absl::InvalidArgumentError("example.is_even: needs one int64 component");
    }
    sluice::ElementSpec output;
    output.components.push_back({input.components[0].shape, sluice::DType::kBool});
    return output;
  }

  absl::StatusOr<sluice::Element> Call(const sluice::Element& input) const override {
    const sluice::Tensor& t = input.components[0];
    sluice::Tensor result(sluice::DType::kBool, t.shape());
    for (int64_t i = 0; i < t.num_elements(); ++i)
      result.mutable_data<bool>()[i] = t.data<int64_t>()[i] % 2 == 0;
    return sluice::Element({std::move(result)});
  }
};

SLUICE_REGISTER_ELEMENT_FUNCTION("example.affine", "x * scale + offset (example plugin)",
                                 [](sluice::FunctionArgs& args)
                                     -> absl::StatusOr<std::unique_ptr<sluice::ElementFunction>> {
                                   absl::StatusOr<double> scale = args.GetDouble("scale", 1.0);
                                   if (!scale.ok()) return scale.status();
                                   absl::StatusOr<double> offset = args.GetDouble("offset", 0.0);
                                   if (!offset.ok()) return offset.status();
                                   return std::make_unique<Affine>(*scale, *offset);
                                 });

SLUICE_REGISTER_ELEMENT_FUNCTION("example.is_even", "true for even int64 values (example plugin)",
                                 [](sluice::FunctionArgs&)
                                     -> absl::StatusOr<std::unique_ptr<sluice::ElementFunction>> {
                                   return std::make_unique<IsEven>();
                                 });

}  // namespace
