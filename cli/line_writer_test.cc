#include "cli/line_writer.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <ext/stdio_filebuf.h>
#include <sstream>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace sluice::cli {
namespace {

// A stream buffer that holds what is written until it is flushed (like a
// file's), and records what was flushed and each piece it was handed.
class HoldingBuffer : public std::streambuf {
 public:
  std::string flushed() {
    absl::MutexLock lock(&mu_);
    return flushed_;
  }
  std::vector<std::string> pieces() {
    absl::MutexLock lock(&mu_);
    return pieces_;
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    absl::MutexLock lock(&mu_);
    held_.append(s, static_cast<size_t>(n));
    pieces_.emplace_back(s, static_cast<size_t>(n));
    return n;
  }
  int overflow(int c) override {
    absl::MutexLock lock(&mu_);
    if (c != traits_type::eof()) {
      held_.push_back(static_cast<char>(c));
      pieces_.emplace_back(1, static_cast<char>(c));
    }
    return c;
  }
  int sync() override {
    absl::MutexLock lock(&mu_);
    flushed_ += held_;
    held_.clear();
    return 0;
  }

 private:
  absl::Mutex mu_;
  std::string held_ ABSL_GUARDED_BY(mu_);
  std::string flushed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> pieces_ ABSL_GUARDED_BY(mu_);
};

TEST_CASE("line_writer: lines are flushed within the delay while the writer waits", "[cli][hardening]") {
  HoldingBuffer buffer;
  std::ostream out(&buffer);
  {
    LineWriter writer(out, absl::Milliseconds(500));
    writer.Write("first");
    writer.Write("second");
    CHECK(buffer.flushed().empty());  // not one flush per line
    // Nothing more is written, as when a reader waits for the next element.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (buffer.flushed().empty() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(buffer.flushed() == "first\nsecond\n");
    writer.Write("third");
  }
  // The last lines go out when the writer ends.
  CHECK(buffer.flushed() == "first\nsecond\nthird\n");
}

// A stream's own buffer sends a line split where the buffer ends; a signal
// between its two writes would leave half a line in the file.
TEST_CASE("line_writer: the stream is only ever handed whole lines", "[cli][hardening]") {
  HoldingBuffer buffer;
  std::ostream out(&buffer);
  std::string expected;
  {
    LineWriter writer(out, absl::Seconds(60));  // no timed flush in this test
    const std::string line(1000, 'x');
    // 70 lines of 1001 bytes pass kFlushBytes (65536) at the 66th.
    for (int i = 0; i < 70; ++i) {
      writer.Write(line);
      expected += line + "\n";
    }
    REQUIRE(buffer.pieces().size() == 1);  // one write of the first 66 lines
    CHECK(buffer.pieces()[0].size() == 66 * 1001);
    CHECK(buffer.flushed() == buffer.pieces()[0]);  // and flushed at once
  }
  const std::vector<std::string> pieces = buffer.pieces();
  REQUIRE(pieces.size() == 2);
  CHECK(pieces[1].size() == 4 * 1001);
  for (const std::string& piece : pieces) CHECK(piece.back() == '\n');
  CHECK(buffer.flushed() == expected);
}

TEST_CASE("line_writer: a pipe whose reader left is noticed, and nothing more is written",
          "[cli][hardening]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  close(fds[0]);  // the reader (head) has left
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &previous);  // as the CLI's main does
  {
    __gnu_cxx::stdio_filebuf<char> buffer(fds[1], std::ios::out);
    std::ostream out(&buffer);
    LineWriter writer(out, absl::Hours(1));
    writer.Write("{\"x\": 1}");
    CHECK_FALSE(writer.ReaderGone());
    writer.Flush();
    CHECK(writer.ReaderGone());
    writer.Write("{\"x\": 2}");  // kept from the stream, which stays failed
    writer.Flush();
    CHECK(writer.ReaderGone());
  }
  sigaction(SIGPIPE, &previous, nullptr);
  // Any other stream failure is not a reader gone.
  std::ostringstream unused;
  unused.setstate(std::ios::badbit);
  LineWriter writer(unused, absl::Hours(1));
  writer.Write("x");
  writer.Flush();
  CHECK_FALSE(writer.ReaderGone());
}

}  // namespace
}  // namespace sluice::cli
