// LineWriter: writes `sluice read`'s and `sluice run`'s lines so that the
// stream is never more than a short delay behind them, even while the
// reader waits for the next element: a read killed by a timeout or a
// signal keeps what it had printed. Flushing every line would cost a write
// system call per line; a thread flushes instead, under the same lock.
#ifndef SLUICE_CLI_LINE_WRITER_H_
#define SLUICE_CLI_LINE_WRITER_H_

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

 private:
  void FlushLoop();

  const absl::Duration delay_;
  absl::Mutex mu_;
  std::ostream& out_ ABSL_GUARDED_BY(mu_);
  bool unflushed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread flusher_;
};

}  // namespace sluice::cli

#endif  // SLUICE_CLI_LINE_WRITER_H_
