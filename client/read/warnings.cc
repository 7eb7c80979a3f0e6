#include "client/read/warnings.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice::reader {
namespace {

absl::Mutex sink_mu(absl::kConstInit);
WarningSink& Sink() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_mu) {
  static auto* sink = new WarningSink();
  return *sink;
}

// Code shared with the daemons logs through spdlog (a token file others may
// read): in a reading process (the CLI, a trainer) every such line goes to
// standard error as "sluice: warning: ...", never into the data on stdout.
const bool kLogsToStandardError = [] {
  auto logger = std::make_shared<spdlog::logger>("sluice", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("sluice: %l: %v");
  spdlog::set_default_logger(std::move(logger));
  return true;
}();

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

}  // namespace sluice::reader
