// The daemons' `python:` settings (path, modules, processes, max_rss_bytes,
// call_timeout_ms, interpreter): which operator modules pipelines' `py:`
// functions may call, and the pool that runs them (pipeline/python_pool.h).
#ifndef SLUICE_SERVICE_PYTHON_SETTINGS_H_
#define SLUICE_SERVICE_PYTHON_SETTINGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "config/config_schema.h"
#include "pipeline/python_pool.h"

namespace sluice {

void AddPythonSettings(ConfigSchema* schema, PythonSettings* settings);

// Makes `settings` the process's (ConfigurePythonFunctions). A worker
// (`start_processes`) starts its processes now, so that a module that does
// not import stops it at start, naming the module. Client functions run
// what any client sends: refused with no client tokens (`tenants`, the
// single client token and each of auth.clients, is 0), and with several
// tenants unless allow_client_functions_with_tenants.
absl::Status SetUpPythonFunctions(const PythonSettings& settings, const std::string& owner,
                                  bool start_processes, int64_t tenants);

}  // namespace sluice

#endif  // SLUICE_SERVICE_PYTHON_SETTINGS_H_
