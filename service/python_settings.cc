#include "service/python_settings.h"

#include <spdlog/spdlog.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "pipeline/python_function.h"

namespace sluice {

void AddPythonSettings(ConfigSchema* schema, PythonSettings* settings) {
  schema->AddStringList("python.path", &settings->path,
                        "directories put first on the Python processes' sys.path (the operator's modules)");
  schema->AddStringList(
      "python.modules", &settings->modules,
      "Python modules the processes import at start: the only ones whose functions pipelines "
      "may call (map: {fn: 'py:MODULE.FUNCTION'})");
  schema->AddInt("python.processes", &settings->processes, 1, 1024,
                 "Python processes per daemon; calls run in parallel on them");
  schema->AddInt("python.max_rss_bytes", &settings->max_rss_bytes, 0, int64_t{1} << 50,
                 "a Python process resident past this fails its call and is replaced; 0: no limit");
  schema->AddInt("python.call_timeout_ms", &settings->call_timeout_ms, 1, 86400000,
                 "a Python call running longer fails and its process is replaced");
  schema->AddString("python.interpreter", &settings->interpreter, "the Python interpreter of the processes");
  schema->AddBool("python.allow_client_functions", &settings->allow_client_functions,
                  "run the Python callables clients ship (cloudpickled) in the processes: remote code "
                  "execution for every holder of a client token; needs auth");
  schema->AddBool(
      "python.allow_client_functions_with_tenants", &settings->allow_client_functions_with_tenants,
      "accept python.allow_client_functions with several tenants (auth.clients), though it ends the "
      "isolation between them");
}

absl::Status SetUpPythonFunctions(const PythonSettings& settings, const std::string& owner,
                                  bool start_processes, int64_t tenants) {
  if (settings.allow_client_functions && tenants == 0) {
    return absl::FailedPreconditionError(
        "python.allow_client_functions runs the Python code any client sends: it needs client "
        "authentication (auth.client_token_file or auth.clients), so that only holders of a token can send "
        "code to run here");
  }
  if (settings.allow_client_functions && tenants > 1 && !settings.allow_client_functions_with_tenants) {
    return absl::FailedPreconditionError(absl::StrCat(
        "python.allow_client_functions ends the isolation between tenants, and this daemon has ", tenants,
        ": a client's function runs in the same processes as every tenant's client functions, so it can "
        "read whatever files the daemon can and change what their functions return (the operator's modules "
        "run in processes of their own). Give each tenant a cluster of its own, or set "
        "python.allow_client_functions_with_tenants: true to accept that"));
  }
  if (settings.allow_client_functions) {
    spdlog::warn(
        "python.allow_client_functions: every holder of a client token can run Python code here (in {} "
        "processes of their own, apart from the operator's modules)",
        settings.processes);
  }
  if (!settings.modules.empty()) {
    spdlog::info("Python functions of [{}] run in {} processes of {}", absl::StrJoin(settings.modules, ", "),
                 settings.processes, settings.interpreter);
  }
  return ConfigurePythonFunctions(
      settings, owner, start_processes && (!settings.modules.empty() || settings.allow_client_functions));
}

}  // namespace sluice
