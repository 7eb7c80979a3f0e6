// Tests of py: element functions (python_function.h, python_pool.h): an
// operator's module run in a pool of Python processes, with keyword
// arguments, dict results, exceptions, a crash, a memory hog and a hang
// (each fails its call, and the next call gets a new process), modules the
// daemon did not load, and seeded functions that repeat and restore.
#include "pipeline/python_function.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/sandbox.h"
#include "sluice/dataset.h"
#include "sluice/iterator.h"
#include "tests/testing/checkpoint_util.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using testing::IntsOf;
using testing::JsonOf;
using Ints = std::vector<int64_t>;
using Lines = std::vector<std::string>;

constexpr char kModule[] = R"(
import ctypes
import time
import numpy as np

def double(x):
    return x * 2

def scale(x, factor, offset=0):
    return x * factor + offset

def square_dict(x):
    return {"x": x, "square": np.int64(x) * x}

def label(element):
    return element["word"] + b"!"

def fail(x):
    if int(x) == 3:
        raise ValueError(f"bad value {int(x)}")
    return x

def crash(x):
    if int(x) == 2:
        ctypes.string_at(0)
    return x

def hog(x):
    if int(x) == 1:
        kept = np.ones(400 << 20, dtype=np.uint8)
        time.sleep(5)
        return kept[:1]
    return x

def hang(x):
    time.sleep(60)
    return x

def noisy(x, seed):
    return np.random.default_rng(seed).integers(0, 1 << 40)

def keep_even(x):
    return int(x) % 2 == 0

def big(x):
    return np.full(40 << 20, 3, dtype=np.uint8) + x[:1]
)";

// The module written to a folder, and the process's py: functions set up
// as a worker's would be (restored to local use at the end).
class Operator {
 public:
  explicit Operator(int64_t processes = 2) {
    testing::WriteFile(dir_.File("augment.py"), kModule);
    PythonSettings settings;
    settings.path = {dir_.path()};
    settings.modules = {"augment"};
    settings.processes = processes;
    settings.max_rss_bytes = int64_t{200} << 20;
    settings.call_timeout_ms = 3000;
    const absl::Status started = ConfigurePythonFunctions(settings, "worker test", true);
    INFO(started.ToString());
    REQUIRE(started.ok());
  }
  ~Operator() { (void)ConfigurePythonFunctions(std::nullopt, "", false); }

 private:
  testing::TempDir dir_;
};

absl::Status FirstError(const Dataset& dataset) {
  absl::StatusOr<std::vector<Element>> all = dataset.Collect();
  return all.ok() ? absl::OkStatus() : all.status();
}

TEST_CASE("python functions: values, keyword arguments, dicts and strings", "[python_functions]") {
  Operator op;
  CHECK(IntsOf(Dataset::Range(5).Map("py:augment.double")) == Ints{0, 2, 4, 6, 8});
  CHECK(IntsOf(Dataset::Range(4).Map("py:augment.scale", {{"factor", 10}, {"offset", 1}})) ==
        Ints{1, 11, 21, 31});
  CHECK(JsonOf(Dataset::Range(3).Map("py:augment.square_dict")) ==
        Lines{"{\"x\": 0, \"square\": 0}", "{\"x\": 1, \"square\": 1}", "{\"x\": 2, \"square\": 4}"});
  CHECK(JsonOf(Dataset::FromTensorSlices({Tensor::FromVector<std::string>({"a", "bc"})}, {"word"})
                   .Map("py:augment.label")) == Lines{"\"a!\"", "\"bc!\""});
  // On both processes at once, in the input's order.
  Ints doubled;
  for (int64_t i = 0; i < 200; ++i) doubled.push_back(2 * i);
  CHECK(IntsOf(Dataset::Range(200).Map("py:augment.double", {}, {.num_parallel_calls = 2})) == doubled);
  // Past the shared memory's half (32 MiB) each way: over the socket.
  absl::StatusOr<std::vector<Element>> big =
      Dataset::FromTensors({Tensor::FromVector<uint8_t>(std::vector<uint8_t>(size_t{36} << 20, 1))})
          .Map("py:augment.big")
          .Collect();
  REQUIRE(big.ok());
  REQUIRE(big->size() == 1);
  const Tensor& bytes = (*big)[0].components[0];
  REQUIRE(bytes.num_elements() == int64_t{40} << 20);
  CHECK(std::all_of(bytes.data<uint8_t>(), bytes.data<uint8_t>() + bytes.num_elements(),
                    [](uint8_t v) { return v == 4; }));
  // A predicate for filter and take_while.
  CHECK(IntsOf(Dataset::Range(7).Filter("py:augment.keep_even")) == Ints{0, 2, 4, 6});
  CHECK(IntsOf(Dataset::Range(7).TakeWhile("py:augment.keep_even")) == Ints{0});
}

TEST_CASE("python functions: an exception is the element's error, with its type, message and frames",
          "[python_functions]") {
  Operator op;
  const absl::Status error = FirstError(Dataset::Range(6).Map("py:augment.fail"));
  CHECK(error.code() == absl::StatusCode::kInvalidArgument);
  const std::string message(error.message());
  CHECK_THAT(message,
             StartsWith("py:augment.fail: ValueError: bad value 3\nTraceback (last frames):\n  File \""));
  CHECK_THAT(message,
             Contains("augment.py\", line 20, in fail\n    raise ValueError(f\"bad value {int(x)}\")"));
  CHECK_THAT(message, !Contains("<string>"));
  // ignore_errors drops it; the process serves the next calls.
  CHECK(IntsOf(Dataset::Range(6).Map("py:augment.fail").IgnoreErrors(true)) == Ints{0, 1, 2, 4, 5});
}

TEST_CASE(
    "python functions: a crash, a memory hog and a hang each fail their call, then a new process serves",
    "[python_functions]") {
  Operator op(1);
  const absl::Status crash = FirstError(Dataset::Range(5).Map("py:augment.crash"));
  CHECK(crash.code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(crash.message()), Contains("py:augment.crash: its Python process ended (pid "));
  CHECK_THAT(
      std::string(crash.message()),
      Contains("ended by signal 11 (Segmentation fault)); worker test starts another for the next call"));
  CHECK(IntsOf(Dataset::Range(3).Map("py:augment.double")) == Ints{0, 2, 4});
  const absl::Status hog = FirstError(Dataset::Range(3).Map("py:augment.hog"));
  CHECK(hog.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(
      std::string(hog.message()),
      Contains("py:augment.hog: its Python process passed python.max_rss_bytes (209715200 bytes resident)"));
  CHECK(IntsOf(Dataset::Range(3).Map("py:augment.double")) == Ints{0, 2, 4});
  const absl::Status hang = FirstError(Dataset::Range(2).Map("py:augment.hang"));
  CHECK(hang.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(hang.message()),
             Contains("py:augment.hang: no answer within 3000 ms (python.call_timeout_ms)"));
  CHECK(IntsOf(Dataset::Range(3).Map("py:augment.double")) == Ints{0, 2, 4});
}

TEST_CASE("python functions: only the modules the daemon loads, and only on a daemon that loads some",
          "[python_functions]") {
  Operator op;
  const absl::Status other = FirstError(Dataset::Range(2).Map("py:os.getcwd"));
  CHECK(other.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(other.message()),
             Contains("py:os.getcwd: worker test does not load the Python module 'os' (python.modules: "
                      "[augment]); pipelines may name functions of the modules its operator loads"));
  CHECK_THAT(std::string(FirstError(Dataset::Range(2).Map("py:double")).message()),
             Contains("'py:double' must name a function of a module: py:MODULE.FUNCTION"));
  // A daemon with no python settings refuses them all.
  REQUIRE(ConfigurePythonFunctions(PythonSettings{}, "worker bare", false).ok());
  CHECK_THAT(std::string(FirstError(Dataset::Range(2).Map("py:augment.double")).message()),
             Contains("worker bare does not load the Python module 'augment' (python.modules: [])"));
  // A module that does not import stops the daemon's start.
  PythonSettings broken;
  broken.modules = {"no_such_module_here"};
  const absl::Status start = ConfigurePythonFunctions(broken, "worker broken", true);
  CHECK(start.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(start.message()),
             Contains("worker broken cannot import its Python modules [no_such_module_here]: "
                      "ModuleNotFoundError: No module named 'no_such_module_here'"));
}

TEST_CASE("python functions: a seeded function repeats, and restores at every position",
          "[python_functions][checkpoint]") {
  Operator op;
  const Dataset noisy = Dataset::Range(30).Map("py:augment.noisy", {{"seed", 7}});
  const Ints first = IntsOf(noisy);
  CHECK(first == IntsOf(noisy));
  CHECK(first != IntsOf(Dataset::Range(30).Map("py:augment.noisy", {{"seed", 8}})));
  CHECK(Ints(first.begin(), first.begin() + 5) != Ints(first.begin() + 5, first.begin() + 10));
  testing::CheckResumesEverywhere(
      Dataset::Range(12).Shuffle(4, 3).Map("py:augment.noisy", {{"seed", 7}}).Repeat(2));
}

}  // namespace
}  // namespace sluice
