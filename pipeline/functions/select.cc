// The `select` element function, documented in docs/pipeline.md.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/function.h"

namespace sluice {
namespace {

// select: keeps the listed components (indices or names), in that order.
class SelectFunction : public ElementFunction {
 public:
  explicit SelectFunction(std::vector<proto::AttrValue> picks) : picks_(std::move(picks)) {}

  static absl::StatusOr<std::unique_ptr<ElementFunction>> Make(FunctionArgs& args) {
    const proto::AttrValue* value = args.Get("components");
    if (value == nullptr) return args.MissingRequired("components");
    std::vector<proto::AttrValue> picks;
    if (value->value_case() == proto::AttrValue::kList) {
      picks.assign(value->list().values().begin(), value->list().values().end());
    } else {
      picks.push_back(*value);
    }
    for (const proto::AttrValue& pick : picks) {
      if (pick.value_case() != proto::AttrValue::kI && pick.value_case() != proto::AttrValue::kS) {
        return absl::InvalidArgumentError("select: each of 'components' must be an index or a name");
      }
    }
    if (picks.empty()) return absl::InvalidArgumentError("select: 'components' is empty");
    return std::make_unique<SelectFunction>(std::move(picks));
  }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    absl::StatusOr<std::vector<int>> indices = Indices(input.components.size(), input.names);
    if (!indices.ok()) return indices.status();
    ElementSpec output;
    for (int i : *indices) {
      output.components.push_back(input.components[i]);
      if (!input.names.empty()) output.names.push_back(input.names[i]);
    }
    return output;
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    static const std::vector<std::string> kNoNames;
    const std::vector<std::string>& names = input.named() ? *input.names : kNoNames;
    absl::StatusOr<std::vector<int>> indices = Indices(input.size(), names);
    if (!indices.ok()) return indices.status();
    Element output;
    std::vector<std::string> output_names;
    for (int i : *indices) {
      output.components.push_back(input.components[i]);
      if (input.named()) output_names.push_back(names[i]);
    }
    output.names = MakeNames(std::move(output_names));
    return output;
  }

 private:
  absl::StatusOr<std::vector<int>> Indices(size_t num_components,
                                           const std::vector<std::string>& names) const {
    std::vector<int> indices;
    for (const proto::AttrValue& pick : picks_) {
      if (pick.value_case() == proto::AttrValue::kI) {
        if (pick.i() < 0 || pick.i() >= static_cast<int64_t>(num_components)) {
          return absl::InvalidArgumentError(absl::StrCat("select: component ", pick.i(),
                                                         " is out of range for an element of ",
                                                         num_components, " components"));
        }
        indices.push_back(static_cast<int>(pick.i()));
      } else {
        auto it = std::find(names.begin(), names.end(), pick.s());
        if (it == names.end()) {
          return absl::InvalidArgumentError(absl::StrCat("select: no component named '", pick.s(), "'"));
        }
        indices.push_back(static_cast<int>(it - names.begin()));
      }
    }
    return indices;
  }

  const std::vector<proto::AttrValue> picks_;
};

SLUICE_REGISTER_ELEMENT_FUNCTION("select", "keeps the listed components", SelectFunction::Make);

}  // namespace
}  // namespace sluice
