// Shared memory between a reader and a worker on its host, with the real
// dispatcherd and workerd (docs/design.md, "Shared memory"): elements arrive
// whole and once, a response too large for a region travels inline, `tcp`
// opts out, and a reader that ends or is killed leaves nothing behind.
#include "service/shared_memory.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "service/metrics.h"
#include "sluice/dataset.h"
#include "tests/integration/captured_warnings.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::CountOf;
using testing::TestCluster;

// Waits (up to 10 s) until worker 0's log holds `what` `times` times; the log.
std::string AwaitWorkerLog(TestCluster& cluster, const std::string& what, int times) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string log;
  while (std::chrono::steady_clock::now() < give_up) {
    log = testing::ReadFileOrEmpty(cluster.worker(0).log_path());
    if (CountOf(log, what) >= times) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return log;
}

// An element of `bytes` uint8 values, byte i being (i * 7 + seed) % 251.
Tensor Pattern(int64_t bytes, int seed) {
  Tensor t(DType::kUInt8, {bytes});
  uint8_t* data = t.mutable_data<uint8_t>();
  for (int64_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>((i * 7 + seed) % 251);
  return t;
}

// This process's readers' count of `metric` (a counter with its labels).
double ClientCount(const std::string& metric) {
  std::istringstream lines(ProcessMetrics().Render());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(metric + " ", 0) == 0) return std::stod(line.substr(metric.size() + 1));
  }
  return 0;
}

// Reads `dataset` to its end (bounded to 60 s), handing each element to
// `take` and then dropping it before the next.
void ReadEach(const Dataset& dataset, const std::function<void(Element&)>& take) {
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  REQUIRE(built.ok());
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*built)->MakeIterator(IteratorContext{});
  REQUIRE(iterator.ok());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (true) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    Element element;
    bool end = false;
    const absl::Status status = (*iterator)->GetNext(&element, &end);
    INFO(status.ToString());
    REQUIRE(status.ok());
    if (end) break;
    take(element);
  }
}

// Reads `dataset` to its end (bounded to 60 s): its elements.
std::vector<Element> ReadAll(const Dataset& dataset) {
  std::vector<Element> elements;
  ReadEach(dataset, [&elements](Element& element) { elements.push_back(std::move(element)); });
  return elements;
}

TEST_CASE("shared memory: a reader on the worker's host reads through it, every element once and whole",
          "[service][shared_memory]") {
  TestCluster cluster({.num_workers = 1, .worker_args = {"--log-level", "info"}});
  const std::string opened = absl::StrCat("opened: reader pid ", getpid(), ", 33554432 bytes");
  SECTION("small elements") {
    std::vector<int64_t> values;
    REQUIRE(testing::ReadToEnd(
                Dataset::Range(50000).ReadFromService(
                    {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch}),
                &values)
                .ok());
    std::sort(values.begin(), values.end());
    std::vector<int64_t> expected(50000);
    for (int64_t i = 0; i < 50000; ++i) expected[i] = i;
    CHECK(values == expected);
  }
  // 9 MiB is past a region's first 4 MiB: the worker says so without handing
  // it out, and the reader's next session has regions of 16 MiB (8 of
  // them, 128 MiB). Every response, the first too, comes through memory.
  int sessions = 1;
  // Strings: a worker never lends them (a lent tensor needs no larger region).
  SECTION("1 MiB strings, and 9 MiB ones, past a region's first 4 MiB") {
    const int64_t bytes = GENERATE(int64_t{1} << 20, int64_t{9} << 20);
    const Tensor pattern = Pattern(bytes, 3);
    Tensor text(DType::kString, Shape{});
    text.mutable_data<std::string>()[0].assign(static_cast<const char*>(pattern.raw_data()),
                                               static_cast<size_t>(bytes));
    const double framed_before = ClientCount("sluice_client_responses_total{form=\"frame\"}");
    const double shared_before = ClientCount("sluice_client_shared_memory_responses_total");
    const std::vector<Element> elements =
        ReadAll(Dataset::FromTensors({text}).Repeat(6).ReadFromService({.service = cluster.ServiceUrl()}));
    REQUIRE(elements.size() == 6);
    for (const Element& element : elements) {
      REQUIRE(element.components.at(0).dtype() == DType::kString);
      CHECK(element.components[0].data<std::string>()[0] == text.data<std::string>()[0]);
    }
    const double framed = ClientCount("sluice_client_responses_total{form=\"frame\"}") - framed_before;
    CHECK(framed >= 1);
    CHECK(ClientCount("sluice_client_shared_memory_responses_total") - shared_before == framed);
    if (bytes > (int64_t{4} << 20)) {
      sessions = 2;
      CHECK_THAT(AwaitWorkerLog(cluster, "134217728 bytes", 1),
                 Contains(absl::StrCat("opened: reader pid ", getpid(), ", 134217728 bytes")));
    }
  }
  const std::string log = AwaitWorkerLog(cluster, "closed: its reader hung up", sessions);
  CHECK_THAT(log, Contains(opened));
  CHECK(CountOf(log, "closed: its reader hung up") == sessions);
  CHECK(CountOf(log, "shared memory session ") == 2 * sessions);  // each opened, then closed
}

// The value of `sample` (a metric and its labels) in a metrics file, or 0.
double MetricValue(const std::string& text, const std::string& sample) {
  const size_t at = text.find(sample + " ");
  return at == std::string::npos ? 0 : std::stod(text.substr(at + sample.size() + 1));
}

TEST_CASE("frames: a reader that asks for protos (as an older one does) reads the same elements",
          "[service][shared_memory][frame]") {
  TestCluster cluster({.num_workers = 1});
  const std::string transport = GENERATE(std::string("tcp"), std::string("auto"));
  INFO("transport " << transport);
  // Batches of 7 with a shorter last one: shapes differ within a response.
  const std::string pipeline = cluster.dir().File("pipeline.yaml");
  std::ofstream(pipeline) << "pipeline:\n  - range: 20000\n  - batch: 7\n  - distribute: {service: \""
                          << cluster.ServiceUrl()
                          << "\", processing_mode: distributed_epoch, transport: " << transport << "}\n";
  // In processes of their own: the environment is read once per process.
  const std::string sluice = SLUICE_CLI;
  const testing::CommandResult framed = testing::RunCommand(absl::StrCat(sluice, " read '", pipeline, "'"));
  const testing::CommandResult protos =
      testing::RunCommand(absl::StrCat("SLUICE_WIRE_FRAMES=0 ", sluice, " read '", pipeline, "'"));
  REQUIRE(framed.exit_code == 0);
  REQUIRE(protos.exit_code == 0);
  CHECK(CountOf(framed.out, "\n") == 2858);
  CHECK(framed.out == protos.out);
  CHECK_THAT(framed.out, Contains("[7000, 7001, 7002, 7003, 7004, 7005, 7006]\n"));
  CHECK_THAT(framed.out, Catch::EndsWith("[19999]\n"));
  // Each form is the one asked for.
  for (const bool frames : {true, false}) {
    const std::string metrics = cluster.dir().File(frames ? "frames.prom" : "protos.prom");
    REQUIRE(testing::RunCommand(absl::StrCat(frames ? "" : "SLUICE_WIRE_FRAMES=0 ", sluice, " bench '",
                                             pipeline, "' --metrics-file '", metrics, "'"))
                .exit_code == 0);
    const std::string text = testing::ReadFileOrEmpty(metrics);
    INFO(text);
    CHECK((MetricValue(text, "sluice_client_responses_total{form=\"frame\"}") > 0) == frames);
    CHECK((MetricValue(text, "sluice_client_responses_total{form=\"protos\"}") > 0) == !frames);
  }
}

TEST_CASE("shared memory: transport tcp opts out, and another transport is refused naming it",
          "[service][shared_memory]") {
  TestCluster cluster({.num_workers = 1, .worker_args = {"--log-level", "info"}});
  std::vector<int64_t> values;
  REQUIRE(testing::ReadToEnd(
              Dataset::Range(1000).ReadFromService({.service = cluster.ServiceUrl(), .transport = "tcp"}),
              &values)
              .ok());
  CHECK(values.size() == 1000);
  CHECK(CountOf(testing::ReadFileOrEmpty(cluster.worker(0).log_path()), "shared memory session") == 0);
  const absl::Status refused =
      internal::BuildPipeline(
          Dataset::Range(10).ReadFromService({.service = cluster.ServiceUrl(), .transport = "udp"}))
          .status();
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message() == "step 2 (distribute): transport must be 'auto' or 'tcp', got 'udp'");
}

TEST_CASE("shared memory: a worker with shared_memory false serves over TCP, and the reader says so",
          "[service][shared_memory]") {
  testing::CapturedWarnings warnings;
  TestCluster cluster({.num_workers = 1, .worker_args = {"--shared-memory=false", "--log-level", "info"}});
  std::vector<int64_t> values;
  REQUIRE(testing::ReadToEnd(Dataset::Range(1000).ReadFromService({.service = cluster.ServiceUrl()}), &values)
              .ok());
  CHECK(values.size() == 1000);
  const std::string worker = absl::StrCat(
      "127.0.0.1:",
      std::stoi(testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(5))));
  CHECK(warnings.messages() ==
        std::vector<std::string>{"shared memory with worker " + worker +
                                 " is off (this worker's shared_memory setting is false): reading over TCP"});
  CHECK(CountOf(testing::ReadFileOrEmpty(cluster.worker(0).log_path()), "shared memory session") == 0);
}

TEST_CASE("shared memory: a reader killed mid-read ends its session and leaves nothing in /dev/shm",
          "[service][shared_memory]") {
  TestCluster cluster({.num_workers = 1, .worker_args = {"--log-level", "info"}});
  const std::string path = cluster.dir().File("p.yaml");
  testing::WriteFile(path,
                     absl::StrCat("pipeline:\n  - range: 1000\n  - repeat: {}\n  - distribute: {service: \"",
                                  cluster.ServiceUrl(), "\"}\n"));
  absl::StatusOr<std::unique_ptr<testing::Process>> read =
      testing::Process::Start({SLUICE_CLI, "read", path}, cluster.dir().File("read.out"));
  REQUIRE(read.ok());
  const std::string opened = absl::StrCat("opened: reader pid ", (*read)->pid(), ", ");
  CHECK_THAT(AwaitWorkerLog(cluster, opened, 1), Contains(opened));
  REQUIRE(kill((*read)->pid(), SIGKILL) == 0);
  CHECK((*read)->Wait(std::chrono::seconds(10)) != 0);
  CHECK_THAT(AwaitWorkerLog(cluster, "closed: its reader hung up", 1),
             Contains("closed: its reader hung up"));
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    CHECK_FALSE(absl::StrContains(entry.path().filename().string(), "sluice"));
  }
}

// The reader's shared regions mapped in this process (/proc/self/maps),
// or with `memfd` "sluice-task-buffer" the workers' lent buffers: each
// mapping's [begin, end).
std::vector<std::pair<uintptr_t, uintptr_t>> ReaderMappings(const std::string& memfd = "sluice-reader") {
  std::vector<std::pair<uintptr_t, uintptr_t>> mappings;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (!absl::StrContains(line, "/memfd:" + memfd)) continue;
    mappings.emplace_back(std::stoull(line.substr(0, line.find('-')), nullptr, 16),
                          std::stoull(line.substr(line.find('-') + 1), nullptr, 16));
  }
  return mappings;
}

TEST_CASE("shared memory: large tensors stay in the region while kept, and a reader keeping all reads on",
          "[service][shared_memory]") {
  TestCluster cluster({.num_workers = 1});
  // Under SharedBufferHeap::kMinBytes, so not lent: copied into the region.
  const size_t bytes = size_t{512} << 10;
  const Tensor pattern = Pattern(static_cast<int64_t>(bytes), 5);
  {
    // Every element kept until the end: the regions they hold never stall
    // the read (past half of them, tensors are copied out).
    const std::vector<Element> elements = ReadAll(
        Dataset::FromTensors({pattern}).Repeat(40).ReadFromService({.service = cluster.ServiceUrl()}));
    REQUIRE(elements.size() == 40);
    const auto mappings = ReaderMappings();
    int in_region = 0;
    for (const Element& element : elements) {
      REQUIRE(element.components.at(0).ByteSize() == bytes);
      CHECK(std::memcmp(element.components[0].raw_data(), pattern.raw_data(), bytes) == 0);
      const auto at = reinterpret_cast<uintptr_t>(element.components[0].raw_data());
      in_region += std::any_of(mappings.begin(), mappings.end(),
                               [at](const auto& m) { return at >= m.first && at < m.second; });
    }
    // The reader's session ended with its iterator; the kept tensors hold
    // its mapping.
    CHECK(in_region > 0);
    CHECK(in_region < 40);
  }
  // Dropped, they unmap it.
  CHECK(ReaderMappings().empty());
}

TEST_CASE("shared memory: a worker lends its large tensors, which the reader maps where they were made",
          "[service][shared_memory][lending]") {
  TestCluster cluster({.num_workers = 1, .worker_args = {"--log-level", "info"}});
  const int64_t bytes = int64_t{1} << 20;  // SharedBufferHeap::kMinBytes
  const Tensor pattern = Pattern(bytes, 5);
  // 300 is past the 64 leases (kMaxLeases) one session may hold.
  const Dataset dataset =
      Dataset::FromTensors({pattern}).Repeat(300).ReadFromService({.service = cluster.ServiceUrl()});
  const double lent_before = ClientCount("sluice_client_lent_tensors_total");
  SECTION("read one at a time: each lease comes back, so every tensor is lent") {
    int64_t read = 0;
    ReadEach(dataset, [&](Element& element) {
      Tensor& tensor = element.components.at(0);
      REQUIRE(tensor.ByteSize() == static_cast<size_t>(bytes));
      REQUIRE(std::memcmp(tensor.raw_data(), pattern.raw_data(), static_cast<size_t>(bytes)) == 0);
      // Written by the reader: its own copy of the page changes, never what
      // the worker lends next (the same buffer, 300 times).
      std::memset(tensor.mutable_raw_data(), 0, static_cast<size_t>(bytes));
      ++read;
    });
    CHECK(read == 300);
    CHECK(ClientCount("sluice_client_lent_tensors_total") - lent_before == 300);
  }
  SECTION("all kept: past a session's leases, elements come as copies, whole") {
    {
      const std::vector<Element> elements = ReadAll(dataset);
      REQUIRE(elements.size() == 300);
      const auto lent_mappings = ReaderMappings("sluice-task-buffer");
      int lent = 0;
      for (const Element& element : elements) {
        REQUIRE(std::memcmp(element.components.at(0).raw_data(), pattern.raw_data(),
                            static_cast<size_t>(bytes)) == 0);
        const auto at = reinterpret_cast<uintptr_t>(element.components[0].raw_data());
        lent += std::any_of(lent_mappings.begin(), lent_mappings.end(),
                            [at](const auto& m) { return at >= m.first && at < m.second; });
      }
      // A session lends 64 (kMaxLeases); the next response goes inline, the
      // reader opens a session with larger regions, and that one lends again.
      CHECK(lent >= 64);
      CHECK(lent < 300);
      CHECK(ClientCount("sluice_client_lent_tensors_total") - lent_before == lent);
    }
    // Dropped, the lent tensors unmap the worker's buffers.
    CHECK(ReaderMappings("sluice-task-buffer").empty());
  }
  SECTION("a 9 MiB tensor, past a region's first 4 MiB, needs no larger region when lent") {
    const Tensor large = Pattern(int64_t{9} << 20, 7);
    const std::vector<Element> elements =
        ReadAll(Dataset::FromTensors({large}).Repeat(3).ReadFromService({.service = cluster.ServiceUrl()}));
    REQUIRE(elements.size() == 3);
    for (const Element& element : elements) {
      REQUIRE(std::memcmp(element.components.at(0).raw_data(), large.raw_data(), size_t{9} << 20) == 0);
    }
    CHECK(ClientCount("sluice_client_lent_tensors_total") - lent_before == 3);
    const std::string log = AwaitWorkerLog(cluster, "closed: its reader hung up", 1);
    CHECK(CountOf(log, "opened: reader pid") == 1);
    CHECK_THAT(log, Contains(absl::StrCat("opened: reader pid ", getpid(), ", 33554432 bytes")));
  }
  SECTION("an element of more tensors than a session may be lent is copied, whole") {
    // kMaxLeases + 1 batches of 1 MiB each (int64), made on the worker.
    const std::vector<Dataset> parts(kMaxLeases + 1, Dataset::Range(1 << 18).Batch(1 << 17));
    const double framed_before = ClientCount("sluice_client_responses_total{form=\"frame\"}");
    const double shared_before = ClientCount("sluice_client_shared_memory_responses_total");
    const std::vector<Element> elements =
        ReadAll(Dataset::Zip(parts).ReadFromService({.service = cluster.ServiceUrl()}));
    REQUIRE(elements.size() == 2);
    for (size_t e = 0; e < elements.size(); ++e) {
      REQUIRE(elements[e].components.size() == kMaxLeases + 1);
      for (const Tensor& t : elements[e].components) {
        REQUIRE(t.num_elements() == (1 << 17));
        CHECK(t.data<int64_t>()[0] == static_cast<int64_t>(e) << 17);
        CHECK(t.data<int64_t>()[(1 << 17) - 1] == (static_cast<int64_t>(e + 1) << 17) - 1);
      }
    }
    CHECK(ClientCount("sluice_client_lent_tensors_total") == lent_before);
    // Sized for the region as never lent: every response came through it
    // (the reader grew its regions when told), none inline.
    const double framed = ClientCount("sluice_client_responses_total{form=\"frame\"}") - framed_before;
    CHECK(framed >= 2);
    CHECK(ClientCount("sluice_client_shared_memory_responses_total") - shared_before == framed);
  }
  SECTION("a reader that reads over TCP is lent nothing") {
    const std::vector<Element> elements = ReadAll(Dataset::FromTensors({pattern}).Repeat(3).ReadFromService(
        {.service = cluster.ServiceUrl(), .transport = "tcp"}));
    REQUIRE(elements.size() == 3);
    CHECK(ClientCount("sluice_client_lent_tensors_total") == lent_before);
  }
}

}  // namespace
}  // namespace sluice
