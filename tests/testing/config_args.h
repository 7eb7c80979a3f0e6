// Runs a daemon's command-line parsing (ParseDaemonConfig) over `args`,
// as a test gives them; argv[0] is added.
#ifndef SLUICE_TESTS_TESTING_CONFIG_ARGS_H_
#define SLUICE_TESTS_TESTING_CONFIG_ARGS_H_

#include <string>
#include <vector>

#include "config/command_line.h"

namespace sluice::testing {

inline int ParseArgs(const std::vector<std::string>& args, ConfigSchema& schema) {
  std::vector<std::string> storage = {"dispatcherd"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return ParseDaemonConfig(static_cast<int>(storage.size()), argv.data(), "test daemon", schema);
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_CONFIG_ARGS_H_
