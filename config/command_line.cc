#include "config/command_line.h"

#include <algorithm>
#include <cstring>
#include <iostream>

#include "CLI/CLI.hpp"

namespace sluice {

int ParseDaemonConfig(int argc, char** argv, const std::string& description, ConfigSchema& schema,
                      const std::string& version) {
  // The file is read before the flags are parsed, so that flags win.
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) config_path = argv[i + 1];
    if (std::strncmp(argv[i], "--config=", 9) == 0) config_path = argv[i] + 9;
  }
  CLI::App app{description};
  if (!version.empty()) app.set_version_flag("--version", version, "print the version and exit");
  app.add_option("--config", config_path, "YAML file with settings; flags override it");
  schema.AddFlags(app);
  if (!config_path.empty()) {
    const bool wants_help = std::any_of(argv + 1, argv + argc, [](const char* a) {
      return std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0 || std::strcmp(a, "--version") == 0;
    });
    if (!wants_help) {
      if (absl::Status status = schema.LoadYamlFile(config_path); !status.ok()) {
        std::cerr << argv[0] << ": " << status.message() << "\n";
        return kConfigErrorExitCode;
      }
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kConfigErrorExitCode;
  }
  if (absl::Status status = schema.Validate(); !status.ok()) {
    std::cerr << argv[0] << ": " << status.message() << "\n";
    return kConfigErrorExitCode;
  }
  return -1;
}

}  // namespace sluice
