#include "client/warnings.h"

#include <iostream>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice {
namespace {

absl::Mutex sink_mu(absl::kConstInit);
WarningSink& Sink() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_mu) {
  static auto* sink = new WarningSink();
  return *sink;
}

}  // namespace

WarningSink SetWarningSink(WarningSink sink) {
  absl::MutexLock lock(&sink_mu);
  WarningSink previous = std::move(Sink());
  Sink() = std::move(sink);
  return previous;
}

void Warn(const std::string& message) {
  absl::MutexLock lock(&sink_mu);
  if (Sink()) {
    Sink()(message);
    return;
  }
  // One write per line, flushed: warnings must not wait behind stdout.
  std::cerr << "sluice: warning: " + message + "\n" << std::flush;
}

}  // namespace sluice
