// Integration tests of what a read promises: it ends normally
// only when it delivered everything its mode promises, and otherwise says
// what was lost, which dispatcher or worker did not answer, and why; and
// the `sluice` command's exit codes and messages for such reads.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/dataset_internal.h"
#include "client/read/warnings.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/captured_warnings.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using testing::CapturedWarnings;
using testing::CommandResult;
using testing::RunCommand;
using testing::TestCluster;
using testing::WriteFile;

// How a read through the SDK ended.
struct ReadOutcome {
  std::map<int64_t, int> counts;
  int64_t total = 0;
  absl::Status status;  // the first error; OK when the read ended normally
  std::chrono::milliseconds took{0};
};

// Reads `dataset` to its end or first error, calling `at(count)` after
// each element; bounded to 60 s.
ReadOutcome ReadUntilEnd(const Dataset& dataset, const std::function<void(int64_t)>& at) {
  ReadOutcome outcome;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  REQUIRE(built.ok());
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*built)->MakeIterator(IteratorContext{});
  REQUIRE(iterator.ok());
  while (true) {
    REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
    Element element;
    bool end = false;
    outcome.status = (*iterator)->GetNext(&element, &end);
    if (!outcome.status.ok() || end) break;
    ++outcome.counts[element.components.at(0).data<int64_t>()[0]];
    at(++outcome.total);
  }
  outcome.took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return outcome;
}

std::string Sluice(const std::string& args) { return absl::StrCat("timeout 60 '", SLUICE_CLI, "' ", args); }

std::string WorkerAddress(TestCluster& cluster, int index) {
  const std::string port = testing::WaitForFile(cluster.dir().File(absl::StrCat("worker", index, ".port")),
                                                std::chrono::seconds(10));
  REQUIRE(!port.empty());
  return absl::StrCat("127.0.0.1:", std::stoi(port));
}

// `sluice ARGS` in the background, its stdout to the file `out` and its
// stderr to `err`; killed, if still running, when the Process goes.
std::unique_ptr<testing::Process> StartSluice(const std::string& args, const std::string& out,
                                              const std::string& err) {
  absl::StatusOr<std::unique_ptr<testing::Process>> process = testing::Process::Start(
      {"/bin/sh", "-c", absl::StrCat("exec '", SLUICE_CLI, "' ", args, " 2>'", err, "'")}, out);
  REQUIRE(process.ok());
  return *std::move(process);
}

int64_t CountLines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

// Waits (bounded) until the file `path` holds at least `lines` lines.
void WaitForLines(const std::string& path, int64_t lines, std::chrono::milliseconds timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const int64_t got = CountLines(testing::ReadFileOrEmpty(path));
    if (got >= lines) return;
    INFO("waiting for " << lines << " lines in " << path << "; " << got << " so far");
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// How many times `sluice read` printed each of 0..size-1, one integer a
// line; fails the test at the first line that is anything else.
std::vector<int> ValueCounts(const std::string& text, int64_t size) {
  std::vector<int> counts(size, 0);
  size_t begin = 0;
  int64_t line = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string value = text.substr(begin, end - begin);
    ++line;
    const bool integer = !value.empty() && value.size() < 19 &&
                         std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!integer || std::stoll(value) >= size) FAIL("line " << line << ": '" << value << "'");
    ++counts[std::stoll(value)];
    begin = end + 1;
  }
  return counts;
}

// "" when the counts are equal, else the first value whose count differs.
std::string FirstDifference(const std::vector<int>& got, const std::vector<int>& expected) {
  if (got.size() != expected.size()) return absl::StrCat("sizes ", got.size(), " vs ", expected.size());
  for (size_t v = 0; v < got.size(); ++v) {
    if (got[v] != expected[v])
      return absl::StrCat("value ", v, ": ", got[v], " times, expected ", expected[v]);
  }
  return "";
}

// `text`'s last line, without its newline.
std::string LastLine(const std::string& text) {
  const std::string trimmed = !text.empty() && text.back() == '\n' ? text.substr(0, text.size() - 1) : text;
  return trimmed.substr(trimmed.rfind('\n') == std::string::npos ? 0 : trimmed.rfind('\n') + 1);
}

// `s` as a regular expression that matches only itself.
std::string RegexQuote(const std::string& s) {
  return std::regex_replace(s, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
}

// Two workers in parallel_epochs serve range(kElements) each; worker 1 is
// killed for good once `kill_after` elements were read. Small worker
// buffers keep it from finishing its epoch before the kill.
constexpr int64_t kElements = 200000;
ReadOutcome ReadThroughLostWorker(TestCluster& cluster, bool allow_partial) {
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("parallel_epochs");
  op.set_max_outstanding_requests(8);
  op.set_allow_partial(allow_partial);
  return ReadUntilEnd(internal::ReadFromService(Dataset::Range(kElements), op), [&](int64_t read) {
    if (read == 1000) cluster.KillWorker(1);
  });
}

TEST_CASE(
    "hardening read: a worker lost in parallel_epochs fails the read with DataLoss naming it and the count",
    "[service][hardening][read]") {
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--worker-timeout-ms", "1000"},
                       .worker_args = {"--buffer-elements", "8"}});
  const std::string lost = WorkerAddress(cluster, 1);
  const ReadOutcome outcome = ReadThroughLostWorker(cluster, /*allow_partial=*/false);
  INFO(outcome.status.ToString());
  REQUIRE(absl::IsDataLoss(outcome.status));
  // Worker 0's epoch arrived whole before the error.
  for (int64_t v : {int64_t{0}, kElements / 2, kElements - 1}) CHECK(outcome.counts.at(v) >= 1);
  CHECK(outcome.total < 2 * kElements);
  const std::string message(outcome.status.message());
  CHECK_THAT(message, Contains("parallel_epochs: the epoch of 1 of 2 workers ended early: worker " + lost));
  CHECK_THAT(message, Contains(" of 200000 elements;"));
  CHECK_THAT(message,
             Contains("elements lost. Set allow_partial to accept a partial epoch "
                      "(distribute(allow_partial=True) in Python, allow_partial: true in YAML, sluice "
                      "read --allow-partial)"));
}

TEST_CASE("hardening read: allow_partial accepts a partial epoch with a warning naming the loss",
          "[service][hardening][read]") {
  CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--worker-timeout-ms", "1000"},
                       .worker_args = {"--buffer-elements", "8"}});
  const std::string lost = WorkerAddress(cluster, 1);
  const ReadOutcome outcome = ReadThroughLostWorker(cluster, /*allow_partial=*/true);
  INFO(outcome.status.ToString());
  REQUIRE(outcome.status.ok());
  CHECK(outcome.total >= kElements);
  CHECK(outcome.total < 2 * kElements);
  CHECK_THAT(warnings.joined(),
             Contains("parallel_epochs: the epoch of 1 of 2 workers ended early: worker " + lost));
  CHECK_THAT(warnings.joined(), Contains("(accepted: allow_partial)"));
}

// What `sluice read` printed, and how it ended.
struct CliRead {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `sluice read FLAGS` of range(kElements) in parallel_epochs from the
// cluster's workers; the workers in `kill` are SIGKILLed (for good) once
// 1000 lines are out.
CliRead CliReadKillingWorkers(TestCluster& cluster, const std::vector<int>& kill, const std::string& flags,
                              const std::string& mode = "parallel_epochs") {
  const std::string path = cluster.dir().File("p.yaml");
  WriteFile(path, absl::StrCat("pipeline:\n  - range: ", kElements, "\n  - distribute: {service: \"",
                               cluster.ServiceUrl(), "\", processing_mode: ", mode, "}\n"));
  const std::string out = cluster.dir().File("read.out");
  const std::string err = cluster.dir().File("read.err");
  std::unique_ptr<testing::Process> read = StartSluice(absl::StrCat("read '", path, "' ", flags), out, err);
  WaitForLines(out, 1000, std::chrono::seconds(30));
  for (int i : kill) cluster.KillWorker(i);
  CliRead result;
  result.exit_code = read->Wait(std::chrono::seconds(60));
  result.out = testing::ReadFileOrEmpty(out);
  result.err = testing::ReadFileOrEmpty(err);
  return result;
}

// "" when `counts` are `whole` workers' whole epochs of range(kElements)
// plus `partial` elements of the epochs of `killed` workers (each value at
// most once from each), else the first value or the total that is off. A
// killed worker's elements need not be a prefix of its epoch: a response
// can die with it while a later one, already sent, arrives.
std::string PartialDifference(const std::vector<int>& counts, int whole, int killed, int64_t partial) {
  int64_t extra = 0;
  for (size_t v = 0; v < counts.size(); ++v) {
    if (counts[v] < whole || counts[v] > whole + killed) {
      return absl::StrCat("value ", v, ": ", counts[v], " times, expected ", whole, " to ", whole + killed);
    }
    extra += counts[v] - whole;
  }
  return extra == partial ? "" : absl::StrCat(extra, " elements of killed workers, expected ", partial);
}

// Without exactly_once, a lost task's unfinished splits are read again:
// the reader says how many of its elements may come twice.
TEST_CASE("hardening read: a distributed_epoch read that lost a worker says how many elements may repeat",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 2, .dispatcher_args = {"--worker-timeout-ms", "1000"}});
  const std::string lost = RegexQuote(WorkerAddress(cluster, 1));
  const CliRead read = CliReadKillingWorkers(cluster, {1}, "", "distributed_epoch");
  INFO(read.err);
  std::smatch match;
  REQUIRE(std::regex_search(
      read.err, match,
      std::regex("sluice: warning: worker " + lost +
                 R"( was lost \(no heartbeat for 1000 ms\) after its task [0-9]+ had delivered ([0-9]+) )"
                 R"(elements to this reader: distributed_epoch reads the splits it had not finished again, )"
                 R"(so up to ([0-9]+) of them may arrive twice \(exactly_once: true receives each element )"
                 R"(exactly once\))")));
  CHECK(match[1] == match[2]);
  // A response the kill cut off in transit ends the read with DataLoss
  // naming it (checked elsewhere); otherwise every element came, and no
  // more repeated than the warning said.
  if (read.exit_code == 0) {
    const std::vector<int> counts = ValueCounts(read.out, kElements);
    CHECK(std::count(counts.begin(), counts.end(), 0) == 0);  // at least once
    CHECK(CountLines(read.out) - kElements <= std::stoll(match[1]));
  } else {
    CHECK_THAT(LastLine(read.err), Contains("lost in transit"));
  }
}

TEST_CASE("hardening read: sluice read with a parallel_epochs worker killed for good exits 1 naming it",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 2, .dispatcher_args = {"--worker-timeout-ms", "1000"}});
  const std::string lost = RegexQuote(WorkerAddress(cluster, 1));
  const std::string ended =
      "parallel_epochs: the epoch of 1 of 2 workers ended early: worker " + lost +
      R"( \(task [0-9]+, no heartbeat for 1000 ms\) after ([0-9]+) of 200000 elements; )"
      R"(([0-9]+) elements lost)";
  // The read's exit code and last stderr line, then its output: worker 0's
  // whole epoch, and `got` elements of worker 1's.
  auto check = [&](const std::string& flags, int exit_code, const std::string& last_line) {
    const CliRead read = CliReadKillingWorkers(cluster, {1}, flags);
    INFO(read.err);
    CHECK(read.exit_code == exit_code);
    std::smatch match;
    const std::string last = LastLine(read.err);
    REQUIRE(std::regex_match(last, match, std::regex(last_line)));
    const int64_t got = std::stoll(match[1]);
    CHECK(got + std::stoll(match[2]) == kElements);
    CHECK(CountLines(read.out) == kElements + got);
    CHECK(PartialDifference(ValueCounts(read.out, kElements), 1, 1, got) == "");
  };
  SECTION("without --allow-partial: exit code 1") {
    check(
        "", 1,
        "sluice: " + ended +
            R"(\. Set allow_partial to accept a partial epoch \(distribute\(allow_partial=True\) in Python, )"
            R"(allow_partial: true in YAML, sluice read --allow-partial\))");
  }
  SECTION("with --allow-partial: exit code 0 and a warning") {
    check("--allow-partial", 0, "sluice: warning: " + ended + R"( \(accepted: allow_partial\))");
  }
}

TEST_CASE("hardening read: sluice read with every parallel_epochs worker killed exits 1 naming both",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 2, .dispatcher_args = {"--worker-timeout-ms", "1000"}});
  const std::vector<std::string> workers = {WorkerAddress(cluster, 0), WorkerAddress(cluster, 1)};
  const CliRead read = CliReadKillingWorkers(cluster, {0, 1}, "");
  INFO(read.err);
  CHECK(read.exit_code == 1);
  // Once both are silent, the dispatcher suspects itself (most workers
  // silent at once) and waits for silent_majority_timeout_ms; the reader's
  // reports that it cannot reach them end that wait. So each is lost to its
  // timeout or to the reports, whichever came first.
  const std::string lost =
      R"(worker (127\.0\.0\.1:[0-9]+) \(task [0-9]+, )"
      R"((?:no heartbeat for 1000 ms|unreachable from a client and silent)\) after ([0-9]+) of 200000 elements; )";
  std::smatch match;
  const std::string last = LastLine(read.err);
  REQUIRE(std::regex_match(
      last, match,
      std::regex("sluice: parallel_epochs: the epoch of 2 of 2 workers ended early: " + lost + lost +
                 R"(([0-9]+) elements lost\. Set allow_partial to accept a partial epoch )"
                 R"(\(distribute\(allow_partial=True\) in Python, allow_partial: true in YAML, )"
                 R"(sluice read --allow-partial\))")));
  // Both workers named, each once, in the order they were found lost.
  CHECK(std::vector<std::string>{std::min(match[1].str(), match[3].str()),
                                 std::max(match[1].str(), match[3].str())} ==
        std::vector<std::string>{std::min(workers[0], workers[1]), std::max(workers[0], workers[1])});
  const int64_t first = std::stoll(match[2]);
  const int64_t second = std::stoll(match[4]);
  CHECK(first + second + std::stoll(match[5]) == 2 * kElements);
  CHECK(CountLines(read.out) == first + second);
  CHECK(PartialDifference(ValueCounts(read.out, kElements), 0, 2, first + second) == "");
}

// sluice read stopped by a signal (here timeout's SIGTERM) keeps what it
// printed, in whole lines: an endless pipeline of short lines, and one of
// lines longer than the 1024 bytes that libstdc++ writes past its buffer.
TEST_CASE("hardening read: sluice read stopped by SIGTERM leaves only whole lines in its output file",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 1});
  struct Case {
    std::string steps;
    int64_t per_line;  // values per line: 1, or a batch's [a, b, ...]
  };
  const std::vector<Case> cases = {
      {"  - range: 1000\n  - repeat: {}\n", 1},
      {"  - range: 1000\n  - repeat: {}\n  - batch: 256\n", 256},
  };
  for (const Case& c : cases) {
    const std::string path = cluster.dir().File("p.yaml");
    WriteFile(path, absl::StrCat("pipeline:\n", c.steps, "  - distribute: {service: \"", cluster.ServiceUrl(),
                                 "\"}\n"));
    const std::string out = cluster.dir().File("read.out");
    const std::string err = cluster.dir().File("read.err");
    const CommandResult result = RunCommand(
        absl::StrCat("timeout -s TERM 3 '", SLUICE_CLI, "' read '", path, "' >'", out, "' 2>'", err, "'"));
    INFO(c.steps << testing::ReadFileOrEmpty(err));
    CHECK(result.exit_code == 124);  // timeout's, for a command it stopped
    const std::string text = testing::ReadFileOrEmpty(out);
    CHECK(CountLines(text) >= 1);
    REQUIRE(!text.empty());
    INFO(
        "the output ends in \"" << absl::CEscape(text.substr(text.size() - std::min<size_t>(text.size(), 40)))
                                << "\"");
    CHECK(text.back() == '\n');
    // Every line is the next one of range(1000), repeated, in order (one
    // worker): compared exactly, the last one too.
    int64_t next = 0;
    int64_t line_number = 0;
    for (size_t begin = 0; begin < text.size(); ++line_number) {
      size_t end = text.find('\n', begin);
      if (end == std::string::npos) end = text.size();
      std::string expected;
      for (int64_t i = 0; i < c.per_line; ++i, next = (next + 1) % 1000) {
        absl::StrAppend(&expected, i == 0 ? "" : ", ", next);
      }
      if (c.per_line > 1) expected = "[" + expected + "]";
      const std::string line = text.substr(begin, end - begin);
      if (line != expected) {
        INFO("line " << line_number + 1);
        CHECK(line == expected);
        break;
      }
      begin = end + 1;
    }
  }
}

// A trainer paused (evaluation, a checkpoint; here SIGSTOP) for longer
// than the dispatcher's client_timeout_ms: the dispatcher releases its
// iteration client, and takes it back when it returns.
TEST_CASE("hardening read: sluice read paused past client_timeout_ms goes on and prints the whole epoch",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--client-timeout-ms", "1000"}});
  const std::string path = cluster.dir().File("p.yaml");
  WriteFile(path, absl::StrCat("pipeline:\n  - range: ", kElements, "\n  - distribute: {service: \"",
                               cluster.ServiceUrl(), "\", processing_mode: distributed_epoch}\n"));
  const std::string out = cluster.dir().File("read.out");
  const std::string err = cluster.dir().File("read.err");
  std::unique_ptr<testing::Process> read = StartSluice(absl::StrCat("read '", path, "'"), out, err);
  WaitForLines(out, 1, std::chrono::seconds(30));
  REQUIRE(kill(read->pid(), SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  // Stopped mid-read: the dispatcher gave up on it meanwhile.
  CHECK(CountLines(testing::ReadFileOrEmpty(out)) < kElements);
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dispatcher().log_path()),
             Contains("iteration client 1 silent for 1000 ms (client_timeout_ms): released; taken back if it "
                      "returns before its iteration is collected"));
  REQUIRE(kill(read->pid(), SIGCONT) == 0);
  CHECK(read->Wait(std::chrono::seconds(60)) == 0);
  const std::string text = testing::ReadFileOrEmpty(out);
  INFO(testing::ReadFileOrEmpty(err));
  CHECK(testing::ReadFileOrEmpty(err).empty());
  CHECK(CountLines(text) == kElements);
  CHECK(FirstDifference(ValueCounts(text, kElements), std::vector<int>(kElements, 1)) == "");
}

// A distributed_epoch read of range(kElements) with `timeout_ms` that calls
// `break_service` after 100 elements, noting when in *broken.
ReadOutcome ReadBreakingAt100(TestCluster& cluster, int64_t timeout_ms,
                              const std::function<void()>& break_service,
                              std::chrono::steady_clock::time_point* broken) {
  const Dataset dataset =
      Dataset::Range(kElements).ReadFromService({.service = cluster.ServiceUrl(),
                                                 .processing_mode = ProcessingMode::kDistributedEpoch,
                                                 .max_outstanding_requests = 8,
                                                 .timeout_ms = timeout_ms});
  return ReadUntilEnd(dataset, [&](int64_t read) {
    if (read == 100) {
      break_service();
      *broken = std::chrono::steady_clock::now();
    }
  });
}

TEST_CASE("hardening read: a dispatcher stopped for good fails the read after timeout_ms, naming it",
          "[service][hardening][read]") {
  CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 1, .worker_args = {"--buffer-elements", "8"}});
  std::chrono::steady_clock::time_point stopped;
  const ReadOutcome outcome = ReadBreakingAt100(
      cluster, 2000, [&] { cluster.dispatcher().Terminate(); }, &stopped);
  INFO(outcome.status.ToString());
  REQUIRE(absl::IsUnavailable(outcome.status));
  CHECK_THAT(std::string(outcome.status.message()),
             Contains("lost the dispatcher at " + cluster.DispatcherAddress() + ": no answer for "));
  CHECK_THAT(std::string(outcome.status.message()), Contains("(timeout_ms 2000)"));
  // timeout_ms counts from the dispatcher's last answer, which came a
  // little before Terminate() returned.
  const auto after_stop = std::chrono::steady_clock::now() - stopped;
  CHECK(after_stop >= std::chrono::milliseconds(1500));
  CHECK(after_stop < std::chrono::seconds(15));
  CHECK_THAT(warnings.joined(),
             Contains("the dispatcher at " + cluster.DispatcherAddress() + " does not answer"));
}

TEST_CASE("hardening read: every distributed_epoch worker lost for good fails the read after timeout_ms",
          "[service][hardening][read]") {
  CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 1,
                       .dispatcher_args = {"--worker-timeout-ms", "1000"},
                       .worker_args = {"--buffer-elements", "8"}});
  std::chrono::steady_clock::time_point killed;
  const ReadOutcome outcome = ReadBreakingAt100(
      cluster, 7000, [&] { cluster.KillWorker(0); }, &killed);
  INFO(outcome.status.ToString());
  REQUIRE(absl::IsUnavailable(outcome.status));
  CHECK_THAT(std::string(outcome.status.message()),
             StartsWith("no worker has served this read for ") &&
                 EndsWith(" ms (timeout_ms 7000): the dispatcher at " + cluster.DispatcherAddress() +
                          " lists no worker for the iteration; start workers, or raise timeout_ms"));
  // The dispatcher drops the worker after its 1 s timeout; the reader then
  // waits timeout_ms for another.
  const auto after_kill = std::chrono::steady_clock::now() - killed;
  CHECK(after_kill >= std::chrono::milliseconds(7000));
  CHECK(after_kill < std::chrono::seconds(30));
  CHECK_THAT(warnings.joined(),
             Contains("no worker serves this read yet (the dispatcher at " + cluster.DispatcherAddress() +
                      " lists none); waiting for up to 7000 ms (timeout_ms)"));
}

TEST_CASE("hardening read: sluice read says the dispatcher refuses connections, within --timeout-ms",
          "[service][hardening][read][cli]") {
  testing::TempDir dir;
  const int port = testing::PickFreePort();  // nothing listens there
  const std::string path = dir.File("p.yaml");
  WriteFile(path, "pipeline:\n  - range: 3\n  - distribute: {service: \"grpc://127.0.0.1:" +
                      std::to_string(port) + "\"}\n");
  const auto start = std::chrono::steady_clock::now();
  const CommandResult result = RunCommand(Sluice(absl::StrCat("read '", path, "' --timeout-ms 1500 2>&1")));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.out, Contains("sluice: warning: the dispatcher at 127.0.0.1:" + std::to_string(port) +
                                  " does not answer yet ("));
  CHECK_THAT(result.out, Contains(absl::StrCat(
                             "p.yaml:3:5: step 2 (distribute): registering the dataset at 127.0.0.1:", port,
                             ": no answer within 1500 ms: ")));
  CHECK_THAT(result.out, Contains("Connection refused"));
  CHECK(took < std::chrono::seconds(10));
}

TEST_CASE("hardening read: definitions the service refuses exit 2 naming the distribute step's file:line",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string path = cluster.dir().File("p.yaml");
  const std::string service = "{service: \"" + cluster.ServiceUrl() + "\", ";
  struct Case {
    std::string steps;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"  - range: 10\n  - distribute: " + service + "exactly_once: true}\n",
       "p.yaml:3:5: step 2 (distribute): exactly_once needs distributed_epoch"},
      {"  - range: 10\n  - distribute: " + service + "sharding_policy: FILE}\n",
       "p.yaml:3:5: step 2 (distribute): sharding policy FILE needs the dispatcher's worker_addresses"},
      {"  - range: 10\n  - distribute: " + service + "job_name: co, num_consumers: 2, consumer_index: 0}\n",
       "p.yaml:3:5: step 2 (distribute): coordinated reads (num_consumers) need an infinite dataset"},
      {"  - range: 10\n  - distribute: " + service + "processing_mode: parallel_epochs}\n  - distribute: " +
           service + "processing_mode: parallel_epochs}\n",
       "p.yaml:4:5: step 3 (distribute): a pipeline has one distribute step at most; the first is "},
      {"  - zip:\n      - [{range: 3}]\n      - [{range: 3}]\n  - distribute: " + service +
           "processing_mode: distributed_epoch}\n",
       "p.yaml:5:5: step 2 (distribute): a pipeline whose source is 'zip' cannot be split for "
       "distributed_epoch; start it with range, from_tensor_slices, list_files, image_folder, webdataset, "
       "text_line, json_lines, tfrecord or fixed_length_record\n"},
  };
  for (const Case& c : cases) {
    WriteFile(path, "pipeline:\n" + c.steps);
    const CommandResult result = RunCommand(Sluice(absl::StrCat("read '", path, "' 2>&1")));
    INFO(c.steps << result.out);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.out, Contains(c.message));
  }
}

TEST_CASE("hardening read: pointing sluice at a worker's port says it is the wrong kind of server",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string worker = WorkerAddress(cluster, 0);
  const std::string path = cluster.dir().File("p.yaml");
  WriteFile(path, "pipeline:\n  - range: 3\n");
  const CommandResult read = RunCommand(
      Sluice(absl::StrCat("read '", path, "' --service grpc://", worker, " --timeout-ms 3000 2>&1")));
  CHECK(read.exit_code == 2);
  CHECK_THAT(read.out,
             Contains("does not serve this call: is the address that of the right kind of Sluice server"));
  const CommandResult status = RunCommand(Sluice(absl::StrCat("status --service grpc://", worker, " 2>&1")));
  CHECK(status.exit_code == 1);
  CHECK_THAT(status.out, Contains("the dispatcher at " + worker +
                                  " refused GetStatus: the server there does not "
                                  "serve this call"));
}

TEST_CASE("hardening read: a finished shared job read again by another reader fails naming the repetition",
          "[service][hardening][read][cli]") {
  TestCluster cluster({.num_workers = 1});
  const std::string path = cluster.dir().File("p.yaml");
  WriteFile(path, "pipeline:\n  - range: 3\n");
  const std::string read = Sluice(absl::StrCat("read '", path, "' --service ", cluster.ServiceUrl(),
                                               " --job-name shared_x --processing-mode distributed_epoch"));
  const CommandResult first = RunCommand(read);
  CHECK(first.exit_code == 0);
  CHECK(first.out == "0\n1\n2\n");
  const std::string err = cluster.dir().File("second.err");
  const CommandResult second = RunCommand(read + " 2>'" + err + "'");
  CHECK(second.exit_code != 0);
  CHECK(second.out.empty());
  CHECK_THAT(testing::ReadFileOrEmpty(err),
             Contains("job 'shared_x' repetition 0 was already read to its end by other consumers, so "
                      "nothing is left for this one"));
}

// A worker registered at an address where nothing answers, heartbeating
// like a live one: its task can never be read.
class PhantomWorker {
 public:
  PhantomWorker(const std::string& dispatcher, std::string address) : address_(std::move(address)) {
    thread_ = std::thread([this, dispatcher] {
      auto stub = proto::DispatcherService::NewStub(MakeChannel(dispatcher));
      absl::MutexLock lock(&mu_);
      while (!stop_) {
        proto::WorkerHeartbeatRequest request;
        *request.mutable_version() = CurrentVersion();
        request.set_worker_address(address_);
        request.set_incarnation("phantom");
        for (int64_t task : tasks_) request.add_current_tasks(task);
        proto::WorkerHeartbeatResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
        mu_.Unlock();
        const bool ok = stub->WorkerHeartbeat(&context, request, &response).ok();
        mu_.Lock();
        if (ok) {
          for (const auto& task : response.new_tasks()) tasks_.push_back(task.task_id());
        }
        mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(400));
      }
    });
  }
  ~PhantomWorker() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

 private:
  const std::string address_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> tasks_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

TEST_CASE("hardening read: a registered worker that does not answer is reported, and reads finish without it",
          "[service][hardening][read]") {
  CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--worker-timeout-ms", "1500"}});
  const std::string phantom = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  PhantomWorker worker(cluster.DispatcherAddress(), phantom);
  cluster.WaitForRegisteredWorkers(2);

  SECTION("distributed_epoch reads every element from the worker that answers") {
    const ReadOutcome outcome = ReadUntilEnd(
        Dataset::Range(1000).ReadFromService(
            {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch}),
        [](int64_t) {});
    INFO(outcome.status.ToString());
    REQUIRE(outcome.status.ok());
    CHECK(outcome.counts.size() == 1000);
    CHECK(outcome.counts.begin()->first == 0);
    CHECK(outcome.counts.rbegin()->first == 999);
  }
  SECTION("parallel_epochs reads the live worker's epoch and reports the other as lost") {
    const ReadOutcome outcome =
        ReadUntilEnd(Dataset::Range(1000).ReadFromService({.service = cluster.ServiceUrl()}), [](int64_t) {});
    INFO(outcome.status.ToString());
    REQUIRE(absl::IsDataLoss(outcome.status));
    CHECK(outcome.total == 1000);
    CHECK_THAT(std::string(outcome.status.message()), Contains("worker " + phantom));
    CHECK_THAT(std::string(outcome.status.message()),
               Contains("after 0 of 1000 elements; 1000 elements lost"));
  }
  CHECK_THAT(warnings.joined(), Contains("worker " + phantom));
  CHECK_THAT(warnings.joined(), Contains("does not answer"));
}

// A real workerd, not PhantomWorker: it runs its task and takes splits of
// the epoch, which readers can never fetch from it at the address it
// advertises. They come back to the worker that answers.
TEST_CASE(
    "hardening read: a real worker advertising an address that does not answer loses no distributed_epoch "
    "element",
    "[service][hardening][read]") {
  CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--worker-timeout-ms", "1500"}});
  const std::string unanswering = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  const std::string log = cluster.dir().File("unanswering.log");
  absl::StatusOr<std::unique_ptr<testing::Process>> worker =
      testing::Process::Start({SLUICE_WORKERD, "--dispatcher", cluster.DispatcherAddress(), "--port", "0",
                               "--bind-address", "127.0.0.1", "--advertised-address", unanswering,
                               "--heartbeat-interval-ms", "100", "--log-level", "info"},
                              log);
  REQUIRE(worker.ok());
  cluster.WaitForRegisteredWorkers(2);
  const ReadOutcome outcome = ReadUntilEnd(
      Dataset::Range(1000).ReadFromService(
          {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch}),
      [](int64_t) {});
  INFO(outcome.status.ToString());
  REQUIRE(outcome.status.ok());
  std::vector<int64_t> values;
  for (const auto& [value, count] : outcome.counts) values.insert(values.end(), count, value);
  std::vector<int64_t> expected(1000);
  for (int64_t i = 0; i < 1000; ++i) expected[i] = i;
  CHECK(values == expected);
  // It was part of the read, and was found out.
  CHECK_THAT(testing::ReadFileOrEmpty(log), Contains("started task "));
  CHECK_THAT(warnings.joined(), Contains("worker " + unanswering + " (task "));
  CHECK_THAT(warnings.joined(), Contains(") does not answer: "));
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dispatcher().log_path()),
             Contains("worker " + unanswering + ": unreachable from clients for "));
  CHECK_THAT(
      testing::ReadFileOrEmpty(cluster.dispatcher().log_path()),
      Contains(" ms though it heartbeats (check its advertised_address); the tasks there of iteration "));
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dispatcher().log_path()),
             Contains("the worker and other iterations' tasks stay"));
}

}  // namespace
}  // namespace sluice
