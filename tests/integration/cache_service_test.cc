// The cache op on real daemons: a worker writes a pipeline's file cache
// only under its cache_dir (a relative filename is taken relative to it),
// refuses a filename outside it, and refuses file caches altogether
// without one (pipeline/sandbox.h).
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/dataset.h"
#include "tests/integration/test_cluster.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::ReadToEnd;
using testing::TestCluster;

constexpr int64_t kElements = 50;

// range(N).cache(filename).repeat(2) read in parallel_epochs mode.
absl::Status ReadCached(const TestCluster& cluster, const std::string& filename,
                        std::vector<int64_t>* values) {
  return ReadToEnd(Dataset::Range(kElements).Cache(filename).Repeat(2).ReadFromService(
                       {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kParallelEpochs}),
                   values);
}

std::string WorkerName(TestCluster& cluster) {
  const std::string port = testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  return absl::StrCat("worker 127.0.0.1:", std::stoi(port));
}

TEST_CASE("cache service: a worker writes file caches under its cache_dir only", "[service][cache]") {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("cache"));
  std::filesystem::create_directories(dir.File("outside"));
  const std::string cache_dir = std::filesystem::canonical(dir.File("cache")).string();
  TestCluster cluster({.num_workers = 1, .worker_args = {"--cache-dir", dir.File("cache")}});
  const std::string worker = WorkerName(cluster);
  std::vector<int64_t> expected;
  for (int repetition = 0; repetition < 2; ++repetition) {
    for (int64_t i = 0; i < kElements; ++i) expected.push_back(i);
  }

  std::vector<int64_t> values;
  absl::Status status = ReadCached(cluster, "run/c", &values);
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(values == expected);
  CHECK(std::filesystem::exists(cache_dir + "/run/c.data"));
  CHECK(std::filesystem::exists(cache_dir + "/run/c.index"));
  CHECK_FALSE(std::filesystem::exists(cache_dir + "/run/c.lockfile"));
  // An absolute filename under cache_dir, and a second read of the same
  // cache from its files.
  for (int read = 0; read < 2; ++read) {
    values.clear();
    status = ReadCached(cluster, cache_dir + "/abs", &values);
    INFO(status.ToString());
    REQUIRE(status.ok());
    CHECK(values == expected);
  }
  CHECK(std::filesystem::exists(cache_dir + "/abs.index"));

  // Outside cache_dir, directly or by '..': refused, nothing written.
  const std::string outside = std::filesystem::canonical(dir.File("outside")).string();
  for (const std::string& filename : {dir.File("outside/c"), dir.File("cache/../outside/c")}) {
    INFO(filename);
    values.clear();
    status = ReadCached(cluster, filename, &values);
    CHECK(status.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(status.message()),
               Contains("cache: '" + filename + "' (in '" + outside + "') is outside the cache_dir of " +
                        worker + " (" + cache_dir + "): pipelines write file caches only under cache_dir"));
    CHECK(values.empty());
  }
  CHECK(std::filesystem::is_empty(dir.File("outside")));
}

TEST_CASE("cache service: a worker without cache_dir refuses file caches", "[service][cache]") {
  testing::TempDir dir;
  TestCluster cluster({.num_workers = 1});
  const std::string worker = WorkerName(cluster);
  std::vector<int64_t> values;
  absl::Status status = ReadCached(cluster, dir.File("c"), &values);
  CHECK(status.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(
      std::string(status.message()),
      Contains("cache: " + worker + " has no cache_dir, so pipelines cannot write file caches on it ('" +
               dir.File("c") + "'); the operator sets cache_dir"));
  CHECK(std::filesystem::is_empty(dir.path()));
  // In memory, the same pipeline reads.
  values.clear();
  status = ReadCached(cluster, "", &values);
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(values.size() == 2 * kElements);
}

TEST_CASE("cache service: a cache_dir that is not a directory stops the worker", "[service][cache]") {
  testing::TempDir dir;
  const testing::CommandResult result = testing::RunCommand(
      absl::StrCat(SLUICE_WORKERD, " --dispatcher 127.0.0.1:1 --cache-dir ", dir.File("missing"), " 2>&1"));
  CHECK(result.exit_code != 0);
  CHECK_THAT(result.out, Contains("cache_dir: '" + dir.File("missing") + "' does not exist"));
}

}  // namespace
}  // namespace sluice
