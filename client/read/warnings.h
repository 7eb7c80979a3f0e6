// Warnings of the data-service reader: things a user must hear about even
// when the read goes on (a worker that does not answer, a dispatcher out
// of reach, a partial epoch accepted with allow_partial). They go to
// standard error as "sluice: warning: ..." unless a program installs its
// own sink (a trainer's logger, or a test). Loading the client library also
// sends spdlog's lines (from code shared with the daemons) to standard
// error as "sluice: LEVEL: ...".
#ifndef SLUICE_CLIENT_READ_WARNINGS_H_
#define SLUICE_CLIENT_READ_WARNINGS_H_

#include <functional>
#include <string>

namespace sluice::reader {

using WarningSink = std::function<void(const std::string& message)>;

// Replaces the sink; an empty function restores standard error. Returns
// the previous sink.
WarningSink SetWarningSink(WarningSink sink);

// Sends one warning to the sink. Thread-safe.
void Warn(const std::string& message);

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_WARNINGS_H_
