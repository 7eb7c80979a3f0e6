#include "cli/line_writer.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <streambuf>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace sluice::cli {
namespace {

// A stream buffer that holds what is written until it is flushed (like a
// file's), and records what was flushed.
class HoldingBuffer : public std::streambuf {
 public:
  std::string flushed() {
    absl::MutexLock lock(&mu_);
    return flushed_;
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    absl::MutexLock lock(&mu_);
    held_.append(s, static_cast<size_t>(n));
    return n;
  }
  int overflow(int c) override {
    absl::MutexLock lock(&mu_);
    if (c != traits_type::eof()) held_.push_back(static_cast<char>(c));
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

}  // namespace
}  // namespace sluice::cli
