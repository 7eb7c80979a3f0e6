#include "client/local_functions.h"

#include <atomic>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/read/definition_checks.h"
#include "pipeline/function.h"

namespace sluice::internal {
namespace {

class LocalMap : public ElementFunction {
 public:
  LocalMap(std::string name, std::shared_ptr<const LocalMapFunction> fn,
           std::optional<ElementSpec> output_spec)
      : name_(std::move(name)), fn_(std::move(fn)), output_spec_(std::move(output_spec)) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec&) const override {
    return output_spec_.value_or(ElementSpec{});
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    absl::StatusOr<Element> output = (*fn_)(input);
    if (!output.ok() || !output_spec_.has_value()) return output;
    // Steps after this one trust the declared spec; an element that breaks
    // it is this function's error, not theirs.
    const std::vector<TensorSpec>& declared = output_spec_->components;
    bool matches = declared.size() == output->components.size();
    for (size_t i = 0; matches && i < declared.size(); ++i) {
      matches = declared[i].dtype == output->components[i].dtype();
    }
    if (matches) return output;
    return absl::InvalidArgumentError(
        absl::StrCat(name_, " returned ", ElementSpec::Of(*output).DebugString(),
                     ", not its declared output_spec ", output_spec_->DebugString()));
  }

 private:
  const std::string name_;
  const std::shared_ptr<const LocalMapFunction> fn_;
  const std::optional<ElementSpec> output_spec_;
};

class LocalFilter : public ElementFunction {
 public:
  explicit LocalFilter(std::shared_ptr<const LocalPredicate> predicate) : predicate_(std::move(predicate)) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec&) const override {
    return ElementSpec{.components = {TensorSpec{PartialShape{}, DType::kBool}}};
  }

  absl::StatusOr<Element> Call(const Element& input) const override {
    absl::StatusOr<bool> keep = (*predicate_)(input);
    if (!keep.ok()) return keep.status();
    return Element::Of(Tensor::Scalar<bool>(*keep));
  }

 private:
  const std::shared_ptr<const LocalPredicate> predicate_;
};

// Registers the factory that `make_factory` makes for a fresh name, and
// returns the name. A plugin could have taken a "local:N" name; the next
// number is tried then.
std::string RegisterUnderFreshName(const char* description,
                                   const std::function<FunctionFactory(const std::string&)>& make_factory) {
  static std::atomic<int64_t> next{1};
  while (true) {
    std::string name = absl::StrCat(reader::kLocalFunctionPrefix, next.fetch_add(1));
    if (FunctionRegistry::Global().Register(name, description, make_factory(name)).ok()) return name;
  }
}

}  // namespace

std::string RegisterLocalMap(LocalMapFunction fn, std::optional<ElementSpec> output_spec) {
  auto shared_fn = std::make_shared<const LocalMapFunction>(std::move(fn));
  return RegisterUnderFreshName(
      "a map function of this process", [&](const std::string& name) -> FunctionFactory {
        return [name, shared_fn,
                output_spec](FunctionArgs&) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
          return std::make_unique<LocalMap>(absl::StrCat("map(", name, ")"), shared_fn, output_spec);
        };
      });
}

std::string RegisterLocalPredicate(LocalPredicate predicate) {
  auto shared = std::make_shared<const LocalPredicate>(std::move(predicate));
  return RegisterUnderFreshName(
      "a filter predicate of this process", [&](const std::string&) -> FunctionFactory {
        return [shared](FunctionArgs&) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
          return std::make_unique<LocalFilter>(shared);
        };
      });
}

}  // namespace sluice::internal
