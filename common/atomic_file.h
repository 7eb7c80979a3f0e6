// Writing a file so that a reader (or a restart after a crash) sees either
// the old contents or the new, never a part: a temporary file beside it,
// fsync, rename over it, fsync the directory.
#ifndef SLUICE_COMMON_ATOMIC_FILE_H_
#define SLUICE_COMMON_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// Errors name the path and the system's reason.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);

}  // namespace sluice

#endif  // SLUICE_COMMON_ATOMIC_FILE_H_
