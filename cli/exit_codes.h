// The `sluice` command's exit codes, and the one way its subcommands report
// an error: 0 on success, 2 for input the user must fix, 1 for a failure
// while running.
#ifndef SLUICE_CLI_EXIT_CODES_H_
#define SLUICE_CLI_EXIT_CODES_H_

#include <ostream>

#include "absl/status/status.h"

namespace sluice::cli {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

// Prints "sluice: MESSAGE" to `err`; the exit code for it.
inline int Fail(const absl::Status& status, std::ostream& err, bool bad_input) {
  err << "sluice: " << status.message() << "\n";
  return bad_input ? kExitBadInput : kExitFailure;
}

// Refusals by the service (a bad definition) are the user's to fix; a
// service that does not answer is a failure to run.
inline bool IsUnreachable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

}  // namespace sluice::cli

#endif  // SLUICE_CLI_EXIT_CODES_H_
