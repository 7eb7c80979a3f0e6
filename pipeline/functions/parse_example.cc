// The `parse_example` element function, documented in docs/pipeline.md.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"
#include "sluice/proto/example.pb.h"

namespace sluice {
namespace {

// parse_example: a serialized tf.train.Example to named components, one per
// declared feature, ordered by name.
class ParseExampleFunction : public ElementFunction {
 public:
  struct Feature {
    std::string name;
    DType dtype;
    PartialShape shape;                   // dims fixed, or [-1] for variable length
    std::optional<Tensor> default_value;  // used when the feature is absent
  };

  explicit ParseExampleFunction(std::vector<Feature> features) : features_(std::move(features)) {
    std::vector<std::string> names;
    for (const Feature& f : features_) {
      names.push_back(f.name);
      all_fixed_ = all_fixed_ && f.shape.IsFullyDefined();
    }
    names_ = MakeNames(std::move(names));
  }

  static absl::StatusOr<std::unique_ptr<ElementFunction>> Make(FunctionArgs& args) {
    const proto::AttrValue* value = args.Get("features");
    if (value == nullptr || value->value_case() != proto::AttrValue::kMap) {
      return absl::InvalidArgumentError(
          "parse_example: argument 'features' must map feature names to {dtype, shape}");
    }
    std::vector<Feature> features;
    for (const auto& [name, config] : value->map().entries()) {
      absl::StatusOr<Feature> feature = ParseFeature(name, config);
      if (!feature.ok()) return feature.status();
      features.push_back(*std::move(feature));
    }
    std::sort(features.begin(), features.end(),
              [](const Feature& a, const Feature& b) { return a.name < b.name; });
    if (features.empty()) return absl::InvalidArgumentError("parse_example: 'features' is empty");
    return std::make_unique<ParseExampleFunction>(std::move(features));
  }

  // A vector of serialized Examples (a batch) parses into batched features
  // when every feature has a fixed shape.
  bool IsElementwise() const override { return all_fixed_; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    const bool scalar = input.components.size() == 1 && input.components[0].dtype == DType::kString &&
                        !input.components[0].shape.unknown_rank && input.components[0].shape.dims.empty();
    const bool vector = all_fixed_ && input.components.size() == 1 &&
                        input.components[0].dtype == DType::kString &&
                        !input.components[0].shape.unknown_rank && input.components[0].shape.dims.size() == 1;
    if (!scalar && !vector) {
      return absl::InvalidArgumentError(
          absl::StrCat("parse_example: needs elements of one scalar string (a serialized Example), got ",
                       input.DebugString()));
    }
    ElementSpec output;
    for (const Feature& f : features_) {
      PartialShape shape = f.shape;
      if (vector) shape.dims.insert(shape.dims.begin(), input.components[0].shape.dims[0]);
      output.components.push_back({shape, f.dtype});
      output.names.push_back(f.name);
    }
    return output;
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    const bool ok_input =
        input.size() == 1 && input.components[0].dtype() == DType::kString &&
        (input.components[0].rank() == 0 || (all_fixed_ && input.components[0].rank() == 1));
    if (!ok_input) return absl::InvalidArgumentError("parse_example: needs a scalar string");
    const Tensor& records = input.components[0];
    // Reused across calls on a thread: parsing into a cleared message keeps
    // its allocations.
    thread_local proto::example::Example example;
    Element output;
    output.names = names_;
    if (records.rank() == 1) {
      const int64_t rows = records.dim(0);
      for (const Feature& f : features_) {
        Shape shape = f.shape.dims;
        shape.insert(shape.begin(), rows);
        output.components.push_back(f.dtype == DType::kString ? Tensor(f.dtype, shape)
                                                              : Tensor::Uninitialized(f.dtype, shape));
      }
      for (int64_t row = 0; row < rows; ++row) {
        if (absl::Status s = ParseInto(records.data<std::string>()[row], row, &example, &output); !s.ok())
          return s;
      }
      return output;
    }
    if (!example.ParseFromString(records.data<std::string>()[0])) return NotAnExample();
    const auto& map = example.features().feature();
    for (const Feature& f : features_) {
      auto it = map.find(f.name);
      if (it == map.end()) {
        if (!f.default_value.has_value()) return MissingFeature(f);
        output.components.push_back(*f.default_value);
        continue;
      }
      absl::StatusOr<int64_t> count = ValueCount(f, it->second);
      if (!count.ok()) return count.status();
      Tensor tensor(f.dtype, f.shape.IsFullyDefined() ? f.shape.dims : Shape{*count});
      CopyValues(f, it->second, *count, &tensor, 0);
      output.components.push_back(std::move(tensor));
    }
    return output;
  }

 private:
  static absl::StatusOr<Feature> ParseFeature(const std::string& name, const proto::AttrValue& config) {
    if (config.value_case() != proto::AttrValue::kMap) {
      return absl::InvalidArgumentError(
          absl::StrCat("parse_example: feature '", name, "' must be a map {dtype, shape, default}"));
    }
    Feature feature{name, DType::kInvalid, PartialShape::Known({}), std::nullopt};
    const auto& entries = config.map().entries();
    for (const auto& [key, v] : entries) {
      if (key != "dtype" && key != "shape" && key != "default") {
        return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name,
                                                       "' has unknown key '", key,
                                                       "' (valid: dtype, shape, default)"));
      }
    }
    auto dtype_it = entries.find("dtype");
    if (dtype_it == entries.end() || dtype_it->second.value_case() != proto::AttrValue::kS) {
      return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name, "' needs a dtype"));
    }
    absl::StatusOr<DType> dtype = ParseDType(dtype_it->second.s());
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parse_example: feature '", name, "': ", dtype.status().message()));
    }
    if (*dtype != DType::kInt64 && *dtype != DType::kFloat32 && *dtype != DType::kString) {
      return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name,
                                                     "' must be int64, float32 or string, as in "
                                                     "tf.train.Example"));
    }
    feature.dtype = *dtype;
    if (auto shape_it = entries.find("shape"); shape_it != entries.end()) {
      if (shape_it->second.value_case() != proto::AttrValue::kList) {
        return absl::InvalidArgumentError(
            absl::StrCat("parse_example: feature '", name, "': shape must be a list of sizes"));
      }
      for (const proto::AttrValue& d : shape_it->second.list().values()) {
        if (d.value_case() != proto::AttrValue::kI || d.i() < kUnknownDim) {
          return absl::InvalidArgumentError(
              absl::StrCat("parse_example: feature '", name, "': shape sizes must be >= -1"));
        }
        feature.shape.dims.push_back(d.i());
      }
      const auto unknown = std::count(feature.shape.dims.begin(), feature.shape.dims.end(), kUnknownDim);
      if (unknown > 0 && !(unknown == 1 && feature.shape.dims.size() == 1)) {
        return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name,
                                                       "': only a 1-D shape [-1] may have an unknown size"));
      }
    }
    if (auto default_it = entries.find("default"); default_it != entries.end()) {
      if (!feature.shape.IsFullyDefined()) {
        return absl::InvalidArgumentError(
            absl::StrCat("parse_example: feature '", name, "': a default needs a fully known shape"));
      }
      Tensor value(feature.dtype, feature.shape.dims);
      const proto::AttrValue& d = default_it->second;
      for (int64_t i = 0; i < value.num_elements(); ++i) {
        if (feature.dtype == DType::kString && d.value_case() == proto::AttrValue::kS) {
          value.mutable_data<std::string>()[i] = d.s();
        } else if (feature.dtype == DType::kInt64 && d.value_case() == proto::AttrValue::kI) {
          value.mutable_data<int64_t>()[i] = d.i();
        } else if (feature.dtype == DType::kFloat32 &&
                   (d.value_case() == proto::AttrValue::kF || d.value_case() == proto::AttrValue::kI)) {
          value.mutable_data<float>()[i] =
              static_cast<float>(d.value_case() == proto::AttrValue::kF ? d.f() : d.i());
        } else {
          return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", name,
                                                         "': the default must be a scalar ",
                                                         DTypeName(feature.dtype)));
        }
      }
      feature.default_value = std::move(value);
    }
    return feature;
  }

  // Parses one record into row `row` of the batched outputs.
  absl::Status ParseInto(const std::string& record, int64_t row, proto::example::Example* example,
                         Element* output) const {
    if (!example->ParseFromString(record)) return NotAnExample();
    const auto& map = example->features().feature();
    for (size_t i = 0; i < features_.size(); ++i) {
      const Feature& f = features_[i];
      Tensor& out = output->components[i];
      const int64_t row_size = NumElements(f.shape.dims);
      auto it = map.find(f.name);
      if (it == map.end()) {
        if (!f.default_value.has_value()) return MissingFeature(f);
        const Tensor& fallback = *f.default_value;
        for (int64_t k = 0; k < row_size; ++k) {
          if (f.dtype == DType::kString) {
            out.mutable_data<std::string>()[row * row_size + k] = fallback.data<std::string>()[k];
          } else if (f.dtype == DType::kInt64) {
            out.mutable_data<int64_t>()[row * row_size + k] = fallback.data<int64_t>()[k];
          } else {
            out.mutable_data<float>()[row * row_size + k] = fallback.data<float>()[k];
          }
        }
        continue;
      }
      absl::StatusOr<int64_t> count = ValueCount(f, it->second);
      if (!count.ok()) return count.status();
      CopyValues(f, it->second, *count, &out, row * row_size);
    }
    return absl::OkStatus();
  }

  // The number of values of a feature, checked against its dtype and shape.
  static absl::StatusOr<int64_t> ValueCount(const Feature& f, const proto::example::Feature& value) {
    int64_t count = 0;
    switch (f.dtype) {
      case DType::kInt64:
        if (value.kind_case() != proto::example::Feature::kInt64List) return KindMismatch(f);
        count = value.int64_list().value_size();
        break;
      case DType::kFloat32:
        if (value.kind_case() != proto::example::Feature::kFloatList) return KindMismatch(f);
        count = value.float_list().value_size();
        break;
      default:
        if (value.kind_case() != proto::example::Feature::kBytesList) return KindMismatch(f);
        count = value.bytes_list().value_size();
    }
    if (f.shape.IsFullyDefined() && NumElements(f.shape.dims) != count) {
      return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", f.name, "' has ", count,
                                                     " values but shape ", ShapeDebugString(f.shape.dims),
                                                     " needs ", NumElements(f.shape.dims)));
    }
    return count;
  }

  static void CopyValues(const Feature& f, const proto::example::Feature& value, int64_t count, Tensor* out,
                         int64_t offset) {
    if (f.dtype == DType::kInt64) {
      std::copy_n(value.int64_list().value().data(), count, out->mutable_data<int64_t>() + offset);
    } else if (f.dtype == DType::kFloat32) {
      std::copy_n(value.float_list().value().data(), count, out->mutable_data<float>() + offset);
    } else {
      for (int64_t i = 0; i < count; ++i) {
        out->mutable_data<std::string>()[offset + i] = value.bytes_list().value(static_cast<int>(i));
      }
    }
  }

  static absl::Status NotAnExample() {
    return absl::DataLossError("parse_example: the record is not a valid tf.train.Example");
  }

  static absl::Status MissingFeature(const Feature& f) {
    return absl::InvalidArgumentError(
        absl::StrCat("parse_example: feature '", f.name, "' is missing and has no default"));
  }

  static absl::Status KindMismatch(const Feature& f) {
    return absl::InvalidArgumentError(
        absl::StrCat("parse_example: feature '", f.name, "' is not stored as ", DTypeName(f.dtype)));
  }

  std::vector<Feature> features_;
  ComponentNames names_;
  bool all_fixed_ = true;
};

SLUICE_REGISTER_ELEMENT_FUNCTION("parse_example", "parses a serialized tf.train.Example",
                                 ParseExampleFunction::Make);

}  // namespace
}  // namespace sluice
