// Issue 32's attacks on a worker through the pipelines a client may send:
// a buffer of 2^24 elements of 1 MiB at max_memory_bytes 3 GiB (finding 1:
// the allocation failure's handler allocated, threw again and ended the
// worker with std::terminate), and a FIFO under data_roots (finding 14:
// its task blocked in open() forever and the worker ignored SIGTERM).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/dataset.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::ReadToEnd;
using testing::TestCluster;

TEST_CASE(
    "worker attacks: prefetch, shuffle or batch of 2^24 at max_memory_bytes fail their task, not the worker",
    "[service][hardening][worker][tenants]") {
  // A worker filling 3 GiB on a loaded machine (CI runs two tests at once)
  // has missed its heartbeats for 10 s and been declared lost, which ended
  // the read with DataLoss instead: the dispatcher waits a minute here, as
  // this test is about memory, not liveness.
  TestCluster cluster({.num_workers = 1,
                       .dispatcher_args = {"--worker-timeout-ms", "60000"},
                       .worker_args = {"--max-memory-bytes", "3221225472"}});
  const Dataset source = Dataset::FromTensors({Tensor(DType::kUInt8, {int64_t{1} << 20})}).Repeat();
  const std::vector<std::pair<std::string, Dataset>> cases = {
      {"prefetch", source.Prefetch(int64_t{1} << 24)},
      {"shuffle", source.Shuffle(int64_t{1} << 24, 1)},
      {"batch", source.Batch(int64_t{1} << 24)},
  };
  for (const auto& [name, pipeline] : cases) {
    INFO(name);
    Iterator iterator = testing::MakeOrFail(pipeline.ReadFromService({.service = cluster.ServiceUrl()}));
    absl::Status status;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (int64_t i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
      absl::StatusOr<std::optional<Element>> element = iterator.GetNextAsOptional();
      if (!element.ok()) {
        status = element.status();
        break;
      }
      REQUIRE(element->has_value());  // the pipeline is endless
      // A reader that pauses lets the buffer grow to the limit; on a loaded
      // machine one pause of 10 s may not be enough to fill 3 GiB.
      if (i % 1000 == 0) std::this_thread::sleep_for(std::chrono::seconds(10));
    }
    INFO(status.ToString());
    CHECK(absl::IsResourceExhausted(status));
    CHECK_THAT(std::string(status.message()),
               Contains("the worker's max_memory_bytes is 3221225472: lower batch, shuffle or buffer sizes"));
  }
  // The same worker serves the next read whole.
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(cluster.RegisteredWorkers() == 1);
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.worker(0).log_path()), !Contains("terminate called"));
}

TEST_CASE("worker attacks: a FIFO under data_roots fails its read at once, and the worker stops on SIGTERM",
          "[service][hardening][worker][tenants]") {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("data"));
  const std::string fifo = dir.File("data/pipe");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  TestCluster cluster({.num_workers = 1,
                       .dispatcher_args = {"--data-roots", dir.File("data")},
                       .worker_args = {"--data-roots", dir.File("data")}});
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status =
      ReadToEnd(Dataset::TextLine({fifo}).ReadFromService({.service = cluster.ServiceUrl()}), nullptr);
  INFO(status.ToString());
  CHECK(absl::IsInvalidArgument(status));
  CHECK_THAT(std::string(status.message()),
             Contains("'" + fifo + "' is a FIFO: file sources read only regular files"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  const auto stopping = std::chrono::steady_clock::now();
  CHECK(cluster.worker(0).Terminate(std::chrono::seconds(10)) == 0);
  CHECK(std::chrono::steady_clock::now() - stopping < std::chrono::seconds(10));
}

}  // namespace
}  // namespace sluice
