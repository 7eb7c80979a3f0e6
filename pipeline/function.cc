#include "pipeline/function.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strings.h"
#include "pipeline/declared_spec.h"
#include "pipeline/python_function.h"

namespace sluice {

FunctionArgs::FunctionArgs(std::string function_name,
                           const google::protobuf::Map<std::string, proto::AttrValue>& args)
    : function_name_(std::move(function_name)), args_(args) {}

bool FunctionArgs::Has(const std::string& key) const { return args_.contains(key); }

const proto::AttrValue* FunctionArgs::Get(const std::string& key) {
  known_.insert(key);
  auto it = args_.find(key);
  return it == args_.end() ? nullptr : &it->second;
}

absl::StatusOr<const proto::AttrValue*> FunctionArgs::Require(const std::string& key, bool has_fallback) {
  const proto::AttrValue* value = Get(key);
  if (value == nullptr && !has_fallback) return MissingRequired(key);
  return value;
}

absl::Status FunctionArgs::MissingRequired(const std::string& key) {
  missed_required_ = true;
  return absl::InvalidArgumentError(absl::StrCat(function_name_, ": missing required argument '", key, "'"));
}

absl::Status FunctionArgs::WrongType(const std::string& key, const char* expected) const {
  return absl::InvalidArgumentError(
      absl::StrCat(function_name_, ": argument '", key, "' must be ", expected));
}

absl::StatusOr<int64_t> FunctionArgs::GetInt(const std::string& key, std::optional<int64_t> fallback) {
  absl::StatusOr<const proto::AttrValue*> value = Require(key, fallback.has_value());
  if (!value.ok()) return value.status();
  if (*value == nullptr) return *fallback;
  if ((*value)->value_case() != proto::AttrValue::kI) return WrongType(key, "an integer");
  return (*value)->i();
}

absl::StatusOr<double> FunctionArgs::GetDouble(const std::string& key, std::optional<double> fallback) {
  absl::StatusOr<const proto::AttrValue*> value = Require(key, fallback.has_value());
  if (!value.ok()) return value.status();
  if (*value == nullptr) return *fallback;
  if ((*value)->value_case() == proto::AttrValue::kI) return static_cast<double>((*value)->i());
  if ((*value)->value_case() != proto::AttrValue::kF) return WrongType(key, "a number");
  return (*value)->f();
}

absl::StatusOr<bool> FunctionArgs::GetBool(const std::string& key, std::optional<bool> fallback) {
  absl::StatusOr<const proto::AttrValue*> value = Require(key, fallback.has_value());
  if (!value.ok()) return value.status();
  if (*value == nullptr) return *fallback;
  if ((*value)->value_case() != proto::AttrValue::kB) return WrongType(key, "true or false");
  return (*value)->b();
}

absl::StatusOr<std::string> FunctionArgs::GetString(const std::string& key,
                                                    std::optional<std::string> fallback) {
  absl::StatusOr<const proto::AttrValue*> value = Require(key, fallback.has_value());
  if (!value.ok()) return value.status();
  if (*value == nullptr) return *fallback;
  if ((*value)->value_case() != proto::AttrValue::kS) return WrongType(key, "a string");
  return (*value)->s();
}

absl::StatusOr<DType> FunctionArgs::GetDType(const std::string& key, std::optional<DType> fallback) {
  std::optional<std::string> fallback_name;
  if (fallback.has_value()) fallback_name = std::string(DTypeName(*fallback));
  absl::StatusOr<std::string> name = GetString(key, fallback_name);
  if (!name.ok()) return name.status();
  absl::StatusOr<DType> dtype = ParseDType(*name);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(function_name_, ": argument '", key, "': ", dtype.status().message()));
  }
  return dtype;
}

absl::Status FunctionArgs::CheckAllUsed() const {
  std::vector<std::string> known(known_.begin(), known_.end());
  for (const auto& [key, value] : args_) {
    if (!known_.contains(key)) {
      std::string valid =
          known.empty() ? "it takes no arguments" : absl::StrCat("valid: ", absl::StrJoin(known, ", "));
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", key, "' for function '",
                                                     function_name_, "'", DidYouMean(key, known), " (", valid,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

FunctionRegistry& FunctionRegistry::Global() {
  static auto* registry = new FunctionRegistry();
  return *registry;
}

absl::Status FunctionRegistry::Register(const std::string& name, const std::string& description,
                                        FunctionFactory factory) {
  absl::MutexLock lock(&mu_);
  if (entries_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("element function '", name, "' is already registered"));
  }
  entries_[name] = Entry{description, std::move(factory)};
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ElementFunction>> FunctionRegistry::Create(
    const proto::FunctionDef& def) const {
  // Any function may declare its output; the function itself never sees
  // the declaration (a py: function would get it as a keyword).
  if (auto declared = def.args().find(kOutputSpecArg); declared != def.args().end()) {
    absl::StatusOr<ElementSpec> spec = ParseDeclaredSpec(declared->second, def.name());
    if (!spec.ok()) return spec.status();
    proto::FunctionDef undeclared = def;
    undeclared.mutable_args()->erase(kOutputSpecArg);
    absl::StatusOr<std::unique_ptr<ElementFunction>> function = Create(undeclared);
    if (!function.ok()) return function.status();
    return WithDeclaredSpec(*std::move(function), *std::move(spec), def.name());
  }
  if (absl::StartsWith(def.name(), kPythonFunctionPrefix)) return MakePythonFunction(def);
  FunctionFactory factory;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(def.name());
    if (it == entries_.end()) {
      std::vector<std::string> names;
      for (const auto& [name, entry] : entries_) names.push_back(name);
      if (def.name().empty()) {
        return absl::InvalidArgumentError("missing function name 'fn'");
      }
      return absl::InvalidArgumentError(
          absl::StrCat("unknown function '", def.name(), "'", DidYouMean(def.name(), names)));
    }
    factory = it->second.factory;
  }
  FunctionArgs args(def.name(), def.args());
  absl::StatusOr<std::unique_ptr<ElementFunction>> function = factory(args);
  // A misspelt argument explains a "missing argument" error better; any
  // other error came before the later arguments were even looked at, so
  // they are not unknown (a bad `mean` must not call `std` unknown).
  absl::Status unused = args.CheckAllUsed();
  if (!function.ok()) return unused.ok() || !args.missed_required() ? function.status() : unused;
  if (!unused.ok()) return unused;
  return function;
}

void FunctionRegistry::Unregister(const std::string& name) {
  absl::MutexLock lock(&mu_);
  entries_.erase(name);
}

bool FunctionRegistry::Contains(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  return entries_.contains(name);
}

std::vector<std::string> FunctionRegistry::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

std::string FunctionRegistry::Description(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  return it == entries_.end() ? "" : it->second.description;
}

namespace internal {
FunctionRegistrar::FunctionRegistrar(const char* name, const char* description, FunctionFactory factory) {
  absl::Status status = FunctionRegistry::Global().Register(name, description, std::move(factory));
  if (!status.ok()) {
    // Registration runs before main, where nothing can report a Status.
    fprintf(stderr, "sluice: %s\n", std::string(status.message()).c_str());
  }
}
}  // namespace internal

absl::StatusOr<ComponentSelector> ComponentSelector::FromArgs(FunctionArgs& args) {
  ComponentSelector selector;
  selector.function_name_ = args.function_name();
  const proto::AttrValue* value = args.Get("component");
  if (value == nullptr) return selector;
  if (value->value_case() == proto::AttrValue::kI) {
    selector.index_ = value->i();
  } else if (value->value_case() == proto::AttrValue::kS) {
    selector.name_ = value->s();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(args.function_name(), ": argument 'component' must be an index or a name"));
  }
  return selector;
}

absl::StatusOr<std::vector<int>> ComponentSelector::Resolve(size_t num_components,
                                                            const std::vector<std::string>& names) const {
  std::vector<int> result;
  if (index_.has_value()) {
    if (*index_ < 0 || *index_ >= static_cast<int64_t>(num_components)) {
      return absl::InvalidArgumentError(absl::StrCat(function_name_, ": component ", *index_,
                                                     " is out of range for an element of ", num_components,
                                                     " components"));
    }
    result.push_back(static_cast<int>(*index_));
  } else if (name_.has_value()) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == *name_) result.push_back(static_cast<int>(i));
    }
    if (result.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(function_name_, ": no component named '", *name_, "'", DidYouMean(*name_, names)));
    }
  } else {
    for (size_t i = 0; i < num_components; ++i) result.push_back(static_cast<int>(i));
  }
  return result;
}

}  // namespace sluice
