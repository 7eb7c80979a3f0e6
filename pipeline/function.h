// Element functions for `map` and `filter`, and the registry they live in.
//
// A function is made by its factory from the step's arguments. The factory
// reads them through FunctionArgs, which remembers what was read, so any
// argument left over is reported as unknown with the closest valid name.
// Plugins add functions with SLUICE_REGISTER_ELEMENT_FUNCTION:
//
//   class AddOne : public sluice::ElementFunction { ... };
//   SLUICE_REGISTER_ELEMENT_FUNCTION(
//       "add_one", "Adds one to every component.",
//       [](sluice::FunctionArgs& args) -> absl::StatusOr<std::unique_ptr<sluice::ElementFunction>> {
//         return std::make_unique<AddOne>();
//       });
#ifndef SLUICE_PIPELINE_FUNCTION_H_
#define SLUICE_PIPELINE_FUNCTION_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sluice/element.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

class ElementFunction {
 public:
  virtual ~ElementFunction() = default;
  // The spec of the output for a given input spec; an error when the
  // function cannot apply to such elements. Called once, at build time.
  virtual absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const = 0;
  // Applies the function. Must be thread-safe: parallel map calls it from
  // several threads at once.
  virtual absl::StatusOr<Element> Call(const Element& input) const = 0;
  // Call on an element the caller gives up, so that a function may reuse
  // its buffers when nothing else holds them.
  virtual absl::StatusOr<Element> CallOwned(Element input) const { return Call(input); }
  // True when applying the function to a batch equals batching its results
  // on the rows, and the function keeps every component (so batching before
  // it cannot fail where batching after it would not): arithmetic, casts.
  // The builder then runs `map` after `batch` rather than before, once per
  // batch instead of once per element, as tf.data's map vectorization does.
  virtual bool IsElementwise() const { return false; }
};

// A function's arguments, with typed getters that record which keys were
// used. Messages name the function, for example "add: argument 'value' ...".
class FunctionArgs {
 public:
  FunctionArgs(std::string function_name, const google::protobuf::Map<std::string, proto::AttrValue>& args);

  const std::string& function_name() const { return function_name_; }
  bool Has(const std::string& key) const;

  absl::StatusOr<int64_t> GetInt(const std::string& key, std::optional<int64_t> fallback = {});
  absl::StatusOr<double> GetDouble(const std::string& key, std::optional<double> fallback = {});
  absl::StatusOr<bool> GetBool(const std::string& key, std::optional<bool> fallback = {});
  absl::StatusOr<std::string> GetString(const std::string& key, std::optional<std::string> fallback = {});
  absl::StatusOr<DType> GetDType(const std::string& key, std::optional<DType> fallback = {});
  // The raw value, or nullptr when absent.
  const proto::AttrValue* Get(const std::string& key);

  // InvalidArgument for the first argument no getter asked for.
  absl::Status CheckAllUsed() const;
  // Whether a getter found a required argument absent.
  bool missed_required() const { return missed_required_; }
  // The error for required argument `key` absent, for factories that read
  // it with Get; noted like a getter's (missed_required).
  absl::Status MissingRequired(const std::string& key);

 private:
  absl::StatusOr<const proto::AttrValue*> Require(const std::string& key, bool has_fallback);
  absl::Status WrongType(const std::string& key, const char* expected) const;

  std::string function_name_;
  const google::protobuf::Map<std::string, proto::AttrValue>& args_;
  std::set<std::string> known_;   // every key a getter asked for
  bool missed_required_ = false;  // a required argument was absent
};

using FunctionFactory = std::function<absl::StatusOr<std::unique_ptr<ElementFunction>>(FunctionArgs& args)>;

class FunctionRegistry {
 public:
  // The process-wide registry, with the built-in functions.
  static FunctionRegistry& Global();

  // Fails on a duplicate name.
  absl::Status Register(const std::string& name, const std::string& description, FunctionFactory factory);
  // Forgets a function, for tests that register one for their own time;
  // datasets already built with it keep it.
  void Unregister(const std::string& name);
  // Makes a function from a FunctionDef. An unknown name or argument is
  // InvalidArgument with the closest valid name.
  absl::StatusOr<std::unique_ptr<ElementFunction>> Create(const proto::FunctionDef& def) const;
  bool Contains(const std::string& name) const;
  std::vector<std::string> Names() const;
  std::string Description(const std::string& name) const;

 private:
  struct Entry {
    std::string description;
    FunctionFactory factory;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

namespace internal {
struct FunctionRegistrar {
  FunctionRegistrar(const char* name, const char* description, FunctionFactory factory);
};
}  // namespace internal

#define SLUICE_FUNCTION_CONCAT_INNER(a, b) a##b
#define SLUICE_FUNCTION_CONCAT(a, b) SLUICE_FUNCTION_CONCAT_INNER(a, b)
// Registers an element function when the enclosing library is loaded.
#define SLUICE_REGISTER_ELEMENT_FUNCTION(name, description, factory)                                  \
  static ::sluice::internal::FunctionRegistrar SLUICE_FUNCTION_CONCAT(sluice_function_, __COUNTER__)( \
      name, description, factory)

// Which components a function acts on: the optional `component` argument
// (an index or a name) picks one; without it, all of them.
class ComponentSelector {
 public:
  static absl::StatusOr<ComponentSelector> FromArgs(FunctionArgs& args);
  // The chosen component indices for elements of this shape.
  absl::StatusOr<std::vector<int>> Resolve(size_t num_components,
                                           const std::vector<std::string>& names) const;
  bool all() const { return !index_.has_value() && !name_.has_value(); }

 private:
  std::string function_name_;
  std::optional<int64_t> index_;
  std::optional<std::string> name_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_FUNCTION_H_
