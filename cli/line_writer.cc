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
  out_.flush();
}

void LineWriter::Write(const std::string& line) {
  absl::MutexLock lock(&mu_);
  out_.write(line.data(), static_cast<std::streamsize>(line.size()));
  out_.put('\n');
  unflushed_ = true;
}

void LineWriter::FlushLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay_);
    if (unflushed_) {
      out_.flush();
      unflushed_ = false;
    }
  }
}

}  // namespace sluice::cli
