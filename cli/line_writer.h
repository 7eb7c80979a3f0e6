// LineWriter: writes `sluice read`'s and `sluice run`'s lines so that the
// stream is never more than a short delay behind them, even while the
// reader waits for the next element, and only ever holds whole lines: a
// read killed by a timeout or a signal keeps what it had printed, each line
// with its newline. Lines gather here and reach the stream in one write of
// whole lines, then a flush, when kFlushBytes have gathered or a thread
// finds some waiting; a stream's own buffer would send a line split at its
// buffer's end.
#ifndef SLUICE_CLI_LINE_WRITER_H_
#define SLUICE_CLI_LINE_WRITER_H_

#include <cstddef>
#include <ostream>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sluice::cli {

class LineWriter {
 public:
  // Lines written reach `out` (flushed) within `delay`.
  explicit LineWriter(std::ostream& out, absl::Duration delay = absl::Milliseconds(100));
  // Flushes what is left.
  ~LineWriter();
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  // Writes `line` and a newline.
  void Write(const std::string& line);
  // Hands every line written so far to the stream, flushed.
  void Flush();
  // True once a write found the stream's reader gone (EPIPE: `sluice read
  // | head` after head exited): the caller stops reading, so that its read
  // is released at once rather than when the dispatcher times it out.
  bool ReaderGone();

  // Gathered lines go out in one write once they pass this size.
  static constexpr size_t kFlushBytes = size_t{64} << 10;

 private:
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushLoop();

  const absl::Duration delay_;
  absl::Mutex mu_;
  std::ostream& out_ ABSL_GUARDED_BY(mu_);
  std::string pending_ ABSL_GUARDED_BY(mu_);  // whole lines, each with its newline
  bool reader_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread flusher_;
};

}  // namespace sluice::cli

#endif  // SLUICE_CLI_LINE_WRITER_H_
