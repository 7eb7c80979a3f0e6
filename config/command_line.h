// A daemon's settings from its command line: the YAML file that --config
// names first, then every flag, which overrides it (ConfigSchema).
#ifndef SLUICE_CONFIG_COMMAND_LINE_H_
#define SLUICE_CONFIG_COMMAND_LINE_H_

#include <string>

#include "config/config_schema.h"

namespace sluice {

// Exit code for bad configuration or flags, and for a port already in use:
// settings the operator must fix.
inline constexpr int kConfigErrorExitCode = 2;

// Parses `argv`: the YAML file named by --config (if any) first, then every
// flag, which overrides it. Returns the exit code to stop with (0 after
// --help, or after --version, which prints `version` when it is given), or
// -1 to go on. Errors are printed to stderr.
int ParseDaemonConfig(int argc, char** argv, const std::string& description, ConfigSchema& schema,
                      const std::string& version = "");

}  // namespace sluice

#endif  // SLUICE_CONFIG_COMMAND_LINE_H_
