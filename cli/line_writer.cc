#include "cli/line_writer.h"

#include <cerrno>

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

bool LineWriter::ReaderGone() {
  absl::MutexLock lock(&mu_);
  return reader_gone_;
}

void LineWriter::FlushLocked() {
  if (pending_.empty() || reader_gone_) return;
  errno = 0;
  out_.write(pending_.data(), static_cast<std::streamsize>(pending_.size()));
  out_.flush();
  pending_.clear();
  // With SIGPIPE ignored (main.cc), a pipe whose reader left fails the
  // write with EPIPE instead of killing the process.
  if (!out_.good() && errno == EPIPE) reader_gone_ = true;
}

void LineWriter::FlushLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay_);
    FlushLocked();
  }
}

}  // namespace sluice::cli
