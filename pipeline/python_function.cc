#include "pipeline/python_function.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/functions/image_function.h"
#include "pipeline/python_wire.h"
#include "pipeline/sandbox.h"

namespace sluice {
namespace {

// The module of the callables clients ship (client_functions.h in the
// Python package): not a real module; the host unpickles the function.
constexpr char kClientModule[] = "__client__";

struct PythonState {
  absl::Mutex mu;
  bool configured ABSL_GUARDED_BY(mu) = false;  // by a daemon
  std::optional<PythonSettings> settings ABSL_GUARDED_BY(mu);
  std::string owner ABSL_GUARDED_BY(mu);
  // The operator's modules' processes; and the clients' callables' own, so
  // that a client's code cannot change what the operator's functions
  // return (issue 50). Locally, one pool runs both.
  std::shared_ptr<PythonPool> pool ABSL_GUARDED_BY(mu);
  std::shared_ptr<PythonPool> client_pool ABSL_GUARDED_BY(mu);
};

PythonState& State() {
  static auto* state = new PythonState;
  return *state;
}

class PythonFunction : public ElementFunction {
 public:
  PythonFunction(std::string name, std::string args_json, uint64_t seed, int64_t state_components,
                 std::shared_ptr<PythonPool> pool)
      : name_(std::move(name)),
        args_json_(std::move(args_json)),
        seed_(seed),
        state_components_(state_components),
        pool_(std::move(pool)) {}

  // What a Python function returns is known only when it runs.
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec&) const override { return ElementSpec{}; }

  absl::StatusOr<Element> Call(const Element& input) const override {
    const std::string fn = name_.substr(sizeof(kPythonFunctionPrefix) - 1);
    return pool_->Call(name_, EncodePythonCall(fn, args_json_, internal::ElementSeed(seed_, input), input,
                                               state_components_));
  }

 private:
  const std::string name_;
  const std::string args_json_;
  const uint64_t seed_;
  const int64_t state_components_;  // scan's: called as fn(state, element)
  const std::shared_ptr<PythonPool> pool_;
};

}  // namespace

absl::Status ConfigurePythonFunctions(std::optional<PythonSettings> settings, const std::string& owner,
                                      bool start_processes) {
  if (!settings.has_value()) {  // back to no daemon's settings
    PythonState& state = State();
    absl::MutexLock lock(&state.mu);
    state.configured = false;
    state.settings.reset();
    state.pool.reset();
    state.client_pool.reset();
    return absl::OkStatus();
  }
  if ((!settings->modules.empty() || settings->allow_client_functions) && settings->processes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("python.processes must be at least 1, got ", settings->processes));
  }
  std::shared_ptr<PythonPool> pool;
  std::shared_ptr<PythonPool> client_pool;
  if (!settings->modules.empty()) {
    PythonSettings operators = *settings;
    operators.allow_client_functions = false;
    pool = std::make_shared<PythonPool>(std::move(operators), owner);
  }
  if (settings->allow_client_functions) {
    PythonSettings clients = *settings;
    clients.modules.clear();
    client_pool = std::make_shared<PythonPool>(std::move(clients), owner);
  }
  if (start_processes) {
    for (const auto& started : {pool, client_pool}) {
      if (started == nullptr) continue;
      if (absl::Status s = started->StartAll(); !s.ok()) return s;
    }
  }
  PythonState& state = State();
  absl::MutexLock lock(&state.mu);
  state.configured = true;
  state.settings = std::move(settings);
  state.owner = owner;
  state.pool = std::move(pool);
  state.client_pool = std::move(client_pool);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ElementFunction>> MakePythonFunction(const proto::FunctionDef& def) {
  const std::string& name = def.name();
  const std::string qualified = name.substr(sizeof(kPythonFunctionPrefix) - 1);
  const size_t dot = qualified.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == qualified.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' must name a function of a module: py:MODULE.FUNCTION"));
  }
  const std::string module = qualified.substr(0, dot);
  // `seed` seeds the element's seed (the function gets that as `seed`);
  // the other arguments are the function's keywords.
  uint64_t seed = 0;
  google::protobuf::Map<std::string, proto::AttrValue> args = def.args();
  if (auto it = args.find("seed"); it != args.end()) {
    if (it->second.value_case() != proto::AttrValue::kI) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": argument 'seed' must be an integer"));
    }
    seed = static_cast<uint64_t>(it->second.i());
    args.erase(it);
  }
  int64_t state_components = 0;
  if (auto it = args.find(kPythonStateComponents); it != args.end()) {
    state_components = it->second.i();
    args.erase(it);
  }
  PythonState& state = State();
  absl::MutexLock lock(&state.mu);
  if (!state.configured && !CurrentPipelineSandbox().enabled) {
    // Local use: the user's own process, which may run what it likes.
    PythonSettings local;
    local.import_on_call = true;
    state.configured = true;
    state.settings = local;
    state.owner = "this process";
    state.pool = std::make_shared<PythonPool>(local, state.owner);
  }
  const bool local = state.settings.has_value() && state.settings->import_on_call;
  // "worker 10.0.0.5:6000" once the daemon knows its address.
  const std::string sandbox_owner = CurrentPipelineSandbox().owner;
  const std::string& owner = !sandbox_owner.empty() ? sandbox_owner
                             : state.owner.empty()  ? std::string("this daemon")
                                                    : state.owner;
  if (module == kClientModule) {
    if (!local && !(state.settings.has_value() && state.settings->allow_client_functions)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a Python callable of the client (", name, "), which ", owner,
                       " does not run: its operator allows them with python.allow_client_functions (and auth "
                       "on); or put the "
                       "function in a module of the workers' python.modules and name it py:MODULE.FUNCTION"));
    }
  } else if (!local) {
    const std::vector<std::string> none;
    const std::vector<std::string>& modules = state.settings.has_value() ? state.settings->modules : none;
    if (std::find(modules.begin(), modules.end(), module) == modules.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, ": ", owner, " does not load the Python module '", module,
                       "' (python.modules: [", absl::StrJoin(modules, ", "),
                       "]); pipelines may name functions of the modules its operator loads"));
    }
  }
  const std::shared_ptr<PythonPool>& pool =
      module == kClientModule && !local ? state.client_pool : state.pool;
  return std::make_unique<PythonFunction>(name, FunctionArgsToJson(args), seed, state_components, pool);
}

}  // namespace sluice
