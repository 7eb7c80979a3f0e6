#include "cli/line_writer.h"

namespace sluice::cli {

LineWriter::LineWriter(std::ostream& out, absl::Duration delay)
    : delay_(delay), out_(out), flusher_([this] { FlushLoop(); }) {}

LineWriter::~LineWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  flusher_.join();
  absl::MutexLock lock(&mu_);
  FlushLocked();
}

void LineWriter::Write(const std::string& line) {
  absl::MutexLock lock(&mu_);
  pending_.append(line);
  pending_.push_back('\n');
  if (pending_.size() >= kFlushBytes) FlushLocked();
}

void LineWriter::Flush() {
  absl::MutexLock lock(&mu_);
  FlushLocked();
}

void LineWriter::FlushLocked() {
  if (pending_.empty()) return;
  out_.write(pending_.data(), static_cast<std::streamsize>(pending_.size()));
  out_.flush();
  pending_.clear();
}

void LineWriter::FlushLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay_);
    FlushLocked();
  }
}

}  // namespace sluice::cli
