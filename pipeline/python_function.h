// `py:MODULE.FUNCTION` element functions: a Python function of an
// operator's module, run in the process's PythonPool (python_pool.h) on
// each element, with the step's other arguments as keyword arguments.
// A daemon configures which modules its processes import
// (ConfigurePythonFunctions); a pipeline naming another is refused. Used
// locally (no daemon, no sandbox), a pool imports what calls name.
#ifndef SLUICE_PIPELINE_PYTHON_FUNCTION_H_
#define SLUICE_PIPELINE_PYTHON_FUNCTION_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "pipeline/function.h"
#include "pipeline/python_pool.h"

namespace sluice {

inline constexpr char kPythonFunctionPrefix[] = "py:";
// What a Python callable a client ships is called once shipped (client
// functions in the Python package): its pickle is an argument.
inline constexpr char kClientFunctionName[] = "py:__client__.call";
// The argument scan adds: the first N components of each call are the
// state, and the function is called as fn(state, element).
inline constexpr char kPythonStateComponents[] = "__state_components";

// Process-wide, set by a daemon before it serves; std::nullopt goes back
// to none (local use, or a daemon that refuses py: functions). With
// `start_processes`, the pool starts its processes now, so that a module
// that does not import fails the daemon's start and the first reads find
// them ready.
absl::Status ConfigurePythonFunctions(std::optional<PythonSettings> settings, const std::string& owner,
                                      bool start_processes);

// The function `def` names (its name starts with kPythonFunctionPrefix).
absl::StatusOr<std::unique_ptr<ElementFunction>> MakePythonFunction(const proto::FunctionDef& def);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_PYTHON_FUNCTION_H_
