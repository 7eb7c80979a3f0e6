// Tests that running out of memory is an error of the pipeline's read,
// never the end of the process (issue 32): a failed allocation on
// prefetch's thread, and pipelines whose buffers grow until they reach a
// memory limit, in a child process so that a failure cannot take the
// test binary down.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/exceptions.h"
#include "pipeline/dataset.h"
#include "pipeline/ops.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLUICE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SLUICE_SANITIZED 1
#endif
#endif

namespace sluice {
namespace {

using Catch::Matchers::StartsWith;

// Yields `elements` elements, each holding a buffer whose release counts
// down `alive`, then throws std::bad_alloc.
class ElementsThenBadAlloc : public IteratorBase {
 public:
  ElementsThenBadAlloc(int elements, std::atomic<int>* alive, absl::Notification* all_released)
      : left_(elements), alive_(alive), all_released_(all_released) {}
  absl::Status GetNext(Element* element, bool* end) override {
    if (left_ == 0) throw std::bad_alloc();
    --left_;
    static int64_t storage = 0;
    std::atomic<int>* alive = alive_;
    absl::Notification* all_released = all_released_;
    alive->fetch_add(1);
    auto buffer = TensorBuffer::Wrap(DType::kInt64, 1, &storage, [alive, all_released] {
      if (alive->fetch_sub(1) == 1) all_released->Notify();
    });
    *element = Element::Of(Tensor::FromBuffer(DType::kInt64, {}, std::move(buffer)));
    *end = false;
    return absl::OkStatus();
  }

 private:
  int left_;
  std::atomic<int>* const alive_;
  absl::Notification* const all_released_;
};

TEST_CASE("out of memory: a failed allocation on prefetch's thread is the read's ResourceExhausted",
          "[pipeline][hardening][memory]") {
  std::atomic<int> alive{0};
  absl::Notification all_released;
  std::unique_ptr<IteratorBase> it =
      MakeBackgroundIterator(std::make_unique<ElementsThenBadAlloc>(3, &alive, &all_released), 10);
  // The three buffered elements go with the failure, unread: memory comes
  // back at once, and the error is the next read's.
  REQUIRE(all_released.WaitForNotificationWithTimeout(absl::Seconds(30)));
  Element element;
  bool end = false;
  const absl::Status status = it->GetNext(&element, &end);
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(status.message() == "prefetch: out of memory (an allocation failed: std::bad_alloc)");
  CHECK(IsAllocationFailure(status));
  CHECK(alive.load() == 0);
  // And it stays the answer.
  CHECK(it->GetNext(&element, &end).code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("out of memory: an error that is not an allocation failure comes after the buffered elements",
          "[pipeline][hardening][memory]") {
  class ElementsThenError : public IteratorBase {
   public:
    absl::Status GetNext(Element* element, bool* end) override {
      if (next_ == 2) return absl::DataLossError("corrupt");
      *element = Element::Of(Tensor::Scalar<int64_t>(next_++));
      *end = false;
      return absl::OkStatus();
    }

   private:
    int64_t next_ = 0;
  };
  std::unique_ptr<IteratorBase> it = MakeBackgroundIterator(std::make_unique<ElementsThenError>(), 10);
  for (int64_t i = 0; i < 2; ++i) {
    Element element;
    bool end = true;
    REQUIRE(it->GetNext(&element, &end).ok());
    CHECK_FALSE(end);
    CHECK(element.components.at(0).data<int64_t>()[0] == i);
  }
  Element element;
  bool end = false;
  CHECK(it->GetNext(&element, &end).code() == absl::StatusCode::kDataLoss);
}

#ifndef SLUICE_SANITIZED

// The address space this process has mapped now.
size_t MappedBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

struct ChildOutcome {
  bool exited = false;  // on its own, with a status
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string report;  // "CODE MESSAGE" of the read's error
};

// Reads `dataset` in a child process limited (RLIMIT_AS, as workerd's
// max_memory_bytes) to what it has mapped plus `headroom`, until an error
// or the end; the child reports the status through a pipe. A consumer
// that pauses every 1024 elements lets a prefetch fill up.
ChildOutcome ReadUnderMemoryLimit(const DatasetPtr& dataset, size_t headroom, bool pause) {
  ChildOutcome outcome;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child: no Catch2 here, and nothing that allocates after the
    // error but what the pipeline frees.
    close(fds[0]);
    absl::StatusOr<std::unique_ptr<IteratorBase>> it = dataset->MakeIterator(IteratorContext{});
    if (!it.ok()) _exit(3);
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
    limit.rlim_cur = std::min<rlim_t>(MappedBytes() + headroom, limit.rlim_max);
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
    absl::Status status;
    for (int64_t read = 0;; ++read) {
      Element element;
      bool end = false;
      status = (*it)->GetNext(&element, &end);
      if (!status.ok() || end) break;
      if (pause && read % 1024 == 0) usleep(10000);
    }
    it->reset();  // the memory back before the report
    char report[1024];
    const int n = std::snprintf(report, sizeof(report), "%d %.*s", static_cast<int>(status.code()),
                                static_cast<int>(status.message().size()), status.message().data());
    if (n > 0 && write(fds[1], report, std::min<size_t>(static_cast<size_t>(n), sizeof(report) - 1)) < 0)
      _exit(5);
    _exit(0);
  }
  close(fds[1]);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(25);
  char chunk[512];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      outcome.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{.fd = fds[0], .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t got = read(fds[0], chunk, sizeof(chunk));
    if (got <= 0) break;  // the child is done (or gone)
    outcome.report.append(chunk, static_cast<size_t>(got));
  }
  close(fds[0]);
  int wait_status = 0;
  REQUIRE(waitpid(pid, &wait_status, 0) == pid);
  outcome.exited = WIFEXITED(wait_status);
  if (outcome.exited) outcome.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) outcome.signal = WTERMSIG(wait_status);
  return outcome;
}

TEST_CASE("out of memory: buffers of 2^24 elements reach a memory limit as ResourceExhausted, not abort",
          "[pipeline][hardening][memory]") {
  // The pipelines: 1 MiB elements (sharing one buffer) repeated
  // into a prefetch, a shuffle or a batch of 2^24, which needs more than
  // the limit for its elements' bookkeeping alone.
  const Dataset source = Dataset::FromTensors({Tensor(DType::kUInt8, {int64_t{1} << 20})}).Repeat();
  struct Case {
    std::string name;
    Dataset dataset;
    bool pause;
  };
  const std::vector<Case> cases = {
      {"prefetch", source.Prefetch(int64_t{1} << 24), true},
      {"shuffle", source.Shuffle(int64_t{1} << 24, 1), false},
      {"batch", source.Batch(int64_t{1} << 24), false},
      {"shuffle into prefetch", source.Shuffle(int64_t{1} << 24, 1).Prefetch(2), false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const DatasetPtr dataset = testing::MustBuild(c.dataset);
    const ChildOutcome outcome = ReadUnderMemoryLimit(dataset, size_t{512} << 20, c.pause);
    INFO("report: " << outcome.report << ", exit " << outcome.exit_code << ", signal " << outcome.signal);
    CHECK_FALSE(outcome.timed_out);
    CHECK(outcome.exited);
    CHECK(outcome.exit_code == 0);
    CHECK_THAT(outcome.report,
               StartsWith(std::to_string(static_cast<int>(absl::StatusCode::kResourceExhausted)) + " "));
  }
}

#endif  // SLUICE_SANITIZED

}  // namespace
}  // namespace sluice
