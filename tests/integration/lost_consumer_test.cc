// Issue 32, finding 12: one of two consumers of a shared job killed with
// kill -9 took elements that then reached no one, and the survivor ended
// OK. Now the end of the epoch waits for the silent consumer, and once it
// is released (client_timeout_ms) the survivor's read fails naming it.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/dataset.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::TestCluster;

TEST_CASE("lost consumer: a shared job's consumer killed mid-epoch fails the survivor's read, naming it",
          "[service][hardening][tenants]") {
  TestCluster cluster({.num_workers = 2, .dispatcher_args = {"--client-timeout-ms", "1500"}});
  constexpr int64_t kElements = 5000000;
  const std::string path = cluster.dir().File("shared.yaml");
  testing::WriteFile(path, absl::StrCat("pipeline:\n  - range: ", kElements, "\n  - distribute: {service: \"",
                                        cluster.ServiceUrl(),
                                        "\", processing_mode: distributed_epoch, job_name: shared}\n"));
  const std::string out = cluster.dir().File("victim.out");
  absl::StatusOr<std::unique_ptr<testing::Process>> victim = testing::Process::Start(
      {"/bin/sh", "-c",
       absl::StrCat("exec '", SLUICE_CLI, "' read '", path, "' 2>'", cluster.dir().File("victim.err"), "'")},
      out);
  REQUIRE(victim.ok());
  // The victim has taken elements before the survivor joins its epoch.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (testing::ReadFileOrEmpty(out).size() < 10000 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(testing::ReadFileOrEmpty(out).size() >= 10000);
  absl::Status survivor;
  int64_t survivor_elements = 0;
  std::thread reader([&] {
    std::vector<int64_t> values;
    survivor = testing::ReadToEnd(
        Dataset::Range(kElements).ReadFromService({.service = cluster.ServiceUrl(),
                                                   .processing_mode = ProcessingMode::kDistributedEpoch,
                                                   .job_name = "shared"}),
        &values);
    survivor_elements = static_cast<int64_t>(values.size());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  (*victim)->Kill();
  reader.join();
  INFO(survivor.ToString() << "; the survivor read " << survivor_elements);
  CHECK(absl::IsDataLoss(survivor));
  CHECK_THAT(
      std::string(survivor.message()),
      Contains("a consumer of job 'shared' (iteration client ") &&
          Contains(") stopped heartbeating for 1500 ms (client_timeout_ms) while the epoch was read, and was "
                   "released: the elements it had taken from the workers reached no other consumer"));
  CHECK(survivor_elements > 0);
  CHECK(survivor_elements < kElements);
}

}  // namespace
}  // namespace sluice
