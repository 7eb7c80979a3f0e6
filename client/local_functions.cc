#include "client/local_functions.h"

#include <atomic>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "client/read/definition_checks.h"
#include "pipeline/declared_spec.h"
#include "pipeline/function.h"

namespace sluice::internal {
namespace {

// What it returns is known when it runs; an output_spec declared with it
// (FunctionRegistry::Create) tells the steps after it before.
class LocalMap : public ElementFunction {
 public:
  explicit LocalMap(std::shared_ptr<const LocalMapFunction> fn) : fn_(std::move(fn)) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec&) const override { return ElementSpec{}; }
  absl::StatusOr<Element> Call(const Element& input) const override { return (*fn_)(input); }

 private:
  const std::shared_ptr<const LocalMapFunction> fn_;
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

std::string RegisterLocalMap(LocalMapFunction fn) {
  auto shared_fn = std::make_shared<const LocalMapFunction>(std::move(fn));
  return RegisterUnderFreshName("a map function of this process", [&](const std::string&) -> FunctionFactory {
    return [shared_fn](FunctionArgs&) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
      return std::make_unique<LocalMap>(shared_fn);
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

namespace sluice {

absl::StatusOr<ElementSpec> ParseOutputSpec(const FunctionArg& declared) {
  return ParseDeclaredSpec(internal::DatasetAccess::Proto(declared), "");
}

}  // namespace sluice
