// Integration tests of the data service: real dispatcherd and workerd
// processes on 127.0.0.1 (see test_cluster.h), read through the SDK and the
// sluice CLI.
#include <algorithm>
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/dataset_internal.h"
#include "common/proto_convert.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using testing::CommandResult;
using testing::RunCommand;
using testing::TestCluster;
using testing::WriteFile;

std::vector<int64_t> Sorted(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

std::vector<int64_t> Iota(int64_t n, int copies = 1) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < copies; ++c) values.push_back(i);
  }
  return values;
}

// Collects a whole dataset, with the test failing on an error.
std::vector<int64_t> CollectInts(const Dataset& dataset) {
  absl::StatusOr<std::vector<Element>> elements = dataset.Collect();
  INFO(elements.status().ToString());
  REQUIRE(elements.ok());
  return testing::Int64Values(*elements);
}

std::vector<int64_t> ParseLines(const std::string& out) {
  std::vector<int64_t> values;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    int64_t v = 0;
    REQUIRE(absl::SimpleAtoi(line, &v));
    values.push_back(v);
  }
  return values;
}

TEST_CASE("service: the issue's parallel_epochs example through sluice read", "[service]") {
  TestCluster cluster({.num_workers = 2});
  const std::string path = cluster.dir().File("example.yaml");
  WriteFile(path, absl::StrCat("pipeline:\n"
                               "  - range: 5\n"
                               "  - map: {fn: square}\n"
                               "  - distribute: {processing_mode: parallel_epochs, service: \"",
                               cluster.ServiceUrl(),
                               "\"}\n"
                               "  - map: {fn: add, value: 1}\n"));
  CommandResult result = RunCommand(absl::StrCat("timeout 60 '", SLUICE_CLI, "' read '", path, "'"));
  CHECK(result.exit_code == 0);
  CHECK(Sorted(ParseLines(result.out)) == std::vector<int64_t>{1, 1, 2, 2, 5, 5, 10, 10, 17, 17});

  // Flags override the YAML: the same pipeline in distributed_epoch.
  result = RunCommand(
      absl::StrCat("timeout 60 '", SLUICE_CLI, "' read '", path, "' --processing-mode distributed_epoch"));
  CHECK(result.exit_code == 0);
  CHECK(Sorted(ParseLines(result.out)) == std::vector<int64_t>{1, 2, 5, 10, 17});
}

TEST_CASE("service: elements travel compressed with snappy or zstd", "[service]") {
  TestCluster cluster({.num_workers = 2});
  for (const std::string codec : {"none", "snappy", "zstd"}) {
    INFO(codec);
    const std::string path = cluster.dir().File(codec + ".yaml");
    WriteFile(path,
              absl::StrCat("pipeline:\n  - from_tensor_slices: [[1, 2, 3], [4, 5, 6]]\n  - repeat: 50\n",
                           "  - distribute: {processing_mode: distributed_epoch, compression: ", codec,
                           ", service: \"", cluster.ServiceUrl(), "\"}\n"));
    CommandResult result = RunCommand(absl::StrCat("timeout 60 '", SLUICE_CLI, "' read '", path, "'"));
    CHECK(result.exit_code == 0);
    std::vector<std::string> lines = absl::StrSplit(result.out, '\n', absl::SkipEmpty());
    CHECK(lines.size() == 100);
    CHECK(std::count(lines.begin(), lines.end(), "[1, 2, 3]") == 50);
    CHECK(std::count(lines.begin(), lines.end(), "[4, 5, 6]") == 50);
  }
  const std::string bad = cluster.dir().File("lz4.yaml");
  WriteFile(bad, absl::StrCat("pipeline:\n  - range: 3\n  - distribute: {compression: lz4, service: \"",
                              cluster.ServiceUrl(), "\"}\n"));
  CommandResult result = RunCommand(absl::StrCat("timeout 60 '", SLUICE_CLI, "' read '", bad, "' 2>&1"));
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.out, Equals(absl::StrCat("sluice: ", bad,
                                             ":3:5: step 2 (distribute): unknown compression 'lz4' "
                                             "(valid: none, snappy, zstd)\n")));
}

TEST_CASE("service: parallel_epochs runs the whole dataset on every worker", "[service]") {
  TestCluster cluster({.num_workers = 2});
  CHECK(Sorted(CollectInts(Dataset::Range(10).ReadFromService({.service = cluster.ServiceUrl()}))) ==
        Iota(10, 2));
}

TEST_CASE("service: one worker's elements arrive in order, with several requests in flight", "[service]") {
  // A small worker buffer makes requests wait for the pipeline, so that
  // they are answered as elements come, in whatever order the responses
  // travel; the reader puts them back in the task's order.
  TestCluster cluster({.num_workers = 1, .worker_args = {"--buffer-elements", "3"}});
  for (int64_t max_outstanding : {4, 64}) {
    INFO("max_outstanding_requests " << max_outstanding);
    CHECK(CollectInts(Dataset::Range(3000).ReadFromService(
              {.service = cluster.ServiceUrl(), .max_outstanding_requests = max_outstanding})) == Iota(3000));
  }
}

TEST_CASE("service: a reader over several connections per worker gets every element in order", "[service]") {
  // Requests take the connections in turn and come back in any order; the
  // reader puts them back in the task's order.
  TestCluster cluster({.num_workers = 1, .worker_args = {"--buffer-elements", "3"}});
  for (int64_t connections : {2, 5}) {
    INFO("connections_per_worker " << connections);
    CHECK(CollectInts(Dataset::Range(3000).ReadFromService({.service = cluster.ServiceUrl(),
                                                            .max_outstanding_requests = 16,
                                                            .connections_per_worker = connections})) ==
          Iota(3000));
  }
}

TEST_CASE("service: a new iteration's tasks reach workers without waiting for a heartbeat", "[service]") {
  // Heartbeats every 10 minutes: the worker registers with its first one
  // and only a pushed task (ProcessTask) can start the read in time.
  TestCluster cluster({.num_workers = 1,
                       .dispatcher_args = {"--worker-timeout-ms", "3600000"},
                       .worker_args = {"--heartbeat-interval-ms", "600000"}});
  auto read = std::async(std::launch::async, [&] {
    return CollectInts(Dataset::Range(10).ReadFromService({.service = cluster.ServiceUrl()}));
  });
  if (read.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    cluster.worker(0).Terminate();  // ends the task, so the read returns
    FAIL("the read did not finish within 30 s: the task waited for a heartbeat");
  }
  CHECK(read.get() == Iota(10));
}

TEST_CASE("service: the reference doc's examples", "[service]") {
  TestCluster cluster({.num_workers = 2});
  CHECK(Sorted(CollectInts(Dataset::Range(10).ReadFromService({.service = cluster.ServiceUrl()}))) ==
        std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9});
  CHECK(Sorted(CollectInts(Dataset::Range(10).ReadFromService(
            {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch}))) ==
        Iota(10));
  // Map before and after distribute.
  CHECK(Sorted(CollectInts(Dataset::Range(5)
                               .Map("square")
                               .ReadFromService({.service = cluster.ServiceUrl()})
                               .Map("add", {{"value", 1}}))) ==
        std::vector<int64_t>{1, 1, 2, 2, 5, 5, 10, 10, 17, 17});
}

TEST_CASE("service: range(10).batch(1000) with 2 workers", "[service]") {
  TestCluster cluster({.num_workers = 2});
  auto rows = [&](const Dataset& dataset) {
    absl::StatusOr<std::vector<Element>> batches = dataset.Collect();
    INFO(batches.status().ToString());
    REQUIRE(batches.ok());
    std::vector<int64_t> sizes;
    for (const Element& b : *batches) sizes.push_back(b.components[0].dim(0));
    return Sorted(sizes);
  };
  // parallel_epochs: each worker batches its whole epoch.
  CHECK(rows(Dataset::Range(10).Batch(1000).ReadFromService({.service = cluster.ServiceUrl()})) ==
        std::vector<int64_t>{10, 10});
  CHECK(rows(Dataset::Range(10)
                 .Batch(1000, {.drop_remainder = true})
                 .ReadFromService({.service = cluster.ServiceUrl()}))
            .empty());
  // distributed_epoch: the workers' batches hold the 10 elements between them.
  std::vector<int64_t> split = rows(Dataset::Range(10).Batch(1000).ReadFromService(
      {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch}));
  int64_t total = 0;
  for (int64_t n : split) total += n;
  CHECK(total == 10);
  CHECK(rows(Dataset::Range(10)
                 .Batch(1000, {.drop_remainder = true})
                 .ReadFromService(
                     {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch}))
            .empty());
}

TEST_CASE("service: a 64 MiB element arrives whole", "[service]") {
  TestCluster cluster({.num_workers = 1});
  constexpr int64_t kBytes = int64_t{64} << 20;
  std::string payload(kBytes, '\0');
  for (int64_t i = 0; i < kBytes; i += 4096) payload[i] = static_cast<char>(i / 4096 % 251);
  const std::string path = cluster.dir().File("big.bin");
  WriteFile(path, payload);
  absl::StatusOr<std::vector<Element>> elements =
      Dataset::FixedLengthRecord({path}, kBytes).ReadFromService({.service = cluster.ServiceUrl()}).Collect();
  INFO(elements.status().ToString());
  REQUIRE(elements.ok());
  REQUIRE(elements->size() == 1);
  const std::string& got = (*elements)[0].components[0].data<std::string>()[0];
  CHECK(got.size() == static_cast<size_t>(kBytes));
  CHECK(got == payload);
}

TEST_CASE("service: distributed_epoch produces each element exactly once", "[service]") {
  TestCluster cluster({.num_workers = 2});
  const Dataset dataset = Dataset::Range(1000)
                              .Map("add", {{"value", 1}})
                              .ReadFromService({.service = cluster.ServiceUrl(),
                                                .processing_mode = ProcessingMode::kDistributedEpoch});
  std::vector<int64_t> expected = Iota(1000);
  for (int64_t& v : expected) ++v;
  CHECK(Sorted(CollectInts(dataset)) == expected);
  // Batching after distribute runs in the client.
  absl::StatusOr<std::vector<Element>> batches =
      Dataset::Range(10)
          .ReadFromService(
              {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch})
          .Batch(4)
          .Collect();
  REQUIRE(batches.ok());
  int64_t rows = 0;
  for (const Element& b : *batches) rows += b.components[0].dim(0);
  CHECK(rows == 10);
}

TEST_CASE("service: consumers of a named job share its elements", "[service]") {
  TestCluster cluster({.num_workers = 2});
  auto consume = [&] {
    return CollectInts(Dataset::Range(1000).Shuffle(100, 7).ReadFromService(
        {.service = cluster.ServiceUrl(),
         .processing_mode = ProcessingMode::kDistributedEpoch,
         .job_name = "shared",
         .max_outstanding_requests = 8}));
  };
  std::future<std::vector<int64_t>> first = std::async(std::launch::async, consume);
  std::future<std::vector<int64_t>> second = std::async(std::launch::async, consume);
  std::vector<int64_t> a = first.get();
  std::vector<int64_t> b = second.get();
  std::vector<int64_t> both = a;
  both.insert(both.end(), b.begin(), b.end());
  CHECK(Sorted(both) == Iota(1000));
}

TEST_CASE("service: a finished repetition of a named job read by another reader is an error naming it",
          "[service]") {
  TestCluster cluster({.num_workers = 1});
  const std::string path = cluster.dir().File("named.yaml");
  WriteFile(path, absl::StrCat("pipeline:\n  - range: 6\n  - distribute: {service: \"", cluster.ServiceUrl(),
                               "\", job_name: nightly}\n"));
  CommandResult first = RunCommand(absl::StrCat("timeout 60 '", SLUICE_CLI, "' read '", path, "'"));
  CHECK(first.exit_code == 0);
  CHECK(Sorted(ParseLines(first.out)) == Iota(6));
  // Another process: its dataset counts from repetition 0, which is read.
  CommandResult second = RunCommand(absl::StrCat("timeout 60 '", SLUICE_CLI, "' read '", path, "' 2>&1"));
  CHECK(second.exit_code != 0);
  CHECK_THAT(second.out,
             Catch::Matchers::Contains("job 'nightly' repetition 0 was already read to its end by "
                                       "other consumers, so nothing is left for this one"));
}

TEST_CASE("service: each iteration of a dataset is a new repetition", "[service]") {
  TestCluster cluster({.num_workers = 1});
  DatasetPtr dataset = testing::MustBuild(
      Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl(), .job_name = "epochs"}));
  for (int epoch = 0; epoch < 2; ++epoch) {
    INFO("epoch " << epoch);
    absl::StatusOr<std::vector<Element>> elements = CollectElements(*dataset);
    REQUIRE(elements.ok());
    CHECK(Sorted(testing::Int64Values(*elements)) == Iota(5));
  }
}

TEST_CASE("service: a job name reused with other parameters is InvalidArgument", "[service]") {
  TestCluster cluster({.num_workers = 1});
  CHECK(CollectInts(Dataset::Range(3).ReadFromService(
            {.service = cluster.ServiceUrl(), .job_name = "mixed"})) == Iota(3));
  absl::StatusOr<std::vector<Element>> other =
      Dataset::Range(3)
          .ReadFromService({.service = cluster.ServiceUrl(),
                            .processing_mode = ProcessingMode::kDistributedEpoch,
                            .job_name = "mixed"})
          .Collect();
  CHECK(other.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(other.status().message()), Contains("job 'mixed' already exists for dataset") &&
                                                        Contains("in parallel_epochs mode") &&
                                                        Contains("in distributed_epoch mode"));
}

TEST_CASE("service: an unsplittable pipeline in distributed_epoch is FailedPrecondition", "[service]") {
  TestCluster cluster({.num_workers = 1});
  absl::StatusOr<std::vector<Element>> result =
      Dataset::Zip({Dataset::Range(3), Dataset::Range(3)})
          .ReadFromService(
              {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch})
          .Collect();
  CHECK(result.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(result.status().message()), Contains("cannot be split for distributed_epoch"));
}

TEST_CASE("service: a worker added mid-job gets a task of the unfinished iteration", "[service]") {
  TestCluster cluster({.num_workers = 1, .worker_args = {"--buffer-elements", "4"}});
  DatasetPtr dataset = testing::MustBuild(
      Dataset::Range(500).ReadFromService({.service = cluster.ServiceUrl(), .max_outstanding_requests = 4}));
  std::unique_ptr<IteratorBase> iterator = testing::MustIterate(dataset);
  std::vector<int64_t> seen;
  auto read = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Element e;
      bool end = false;
      REQUIRE(iterator->GetNext(&e, &end).ok());
      if (end) return false;
      seen.push_back(e.components[0].data<int64_t>()[0]);
    }
    return true;
  };
  // Small buffers keep the first worker from finishing before the second joins.
  REQUIRE(read(10));
  cluster.AddWorker();
  while (read(100)) {
  }
  CHECK(Sorted(seen) == Iota(500, 2));
}

TEST_CASE("service: a client started before the dispatcher keeps trying", "[service]") {
  const int port = testing::PickFreePort();
  const std::string url = absl::StrCat("grpc://127.0.0.1:", port);
  std::future<absl::StatusOr<std::vector<Element>>> reader = std::async(
      std::launch::async, [&] { return Dataset::Range(4).ReadFromService({.service = url}).Collect(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  testing::TempDir dir;
  auto dispatcher = testing::Process::Start({SLUICE_DISPATCHERD, "--port", std::to_string(port),
                                             "--bind-address", "127.0.0.1", "--log-level", "warn"},
                                            dir.File("dispatcher.log"));
  REQUIRE(dispatcher.ok());
  auto worker = testing::Process::Start(
      {SLUICE_WORKERD, "--dispatcher", absl::StrCat("127.0.0.1:", port), "--port", "0", "--bind-address",
       "127.0.0.1", "--heartbeat-interval-ms", "100", "--log-level", "warn"},
      dir.File("worker.log"));
  REQUIRE(worker.ok());
  REQUIRE(reader.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  absl::StatusOr<std::vector<Element>> elements = reader.get();
  INFO(elements.status().ToString());
  REQUIRE(elements.ok());
  // The worker may register after the iteration started: it joins it.
  CHECK(Sorted(testing::Int64Values(*elements)) == Iota(4));
}

TEST_CASE("service: an unreachable dispatcher is a clear error within the timeout", "[service]") {
  const int port = testing::PickFreePort();  // nothing listens there
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<Element>> result =
      Dataset::Range(3)
          .ReadFromService({.service = absl::StrCat("grpc://127.0.0.1:", port), .timeout_ms = 1000})
          .Collect();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));
  CHECK(result.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(result.status().message()),
             Catch::Matchers::StartsWith(
                 absl::StrCat("step 2 (distribute): registering the dataset at 127.0.0.1:", port,
                              ": no answer within 1000 ms: failed to connect")));
  CHECK_THAT(std::string(result.status().message()), Catch::Matchers::Contains("Connection refused"));
}

TEST_CASE("service: by default an address where nothing listens fails within about 10 s, naming it",
          "[service]") {
  const int port = testing::PickFreePort();  // nothing listens there
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<Element>> result =
      Dataset::Range(3).ReadFromService({.service = absl::StrCat("grpc://127.0.0.1:", port)}).Collect();
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= std::chrono::seconds(9));
  CHECK(took < std::chrono::seconds(20));  // not the minute a dispatcher that answers slowly gets
  CHECK(result.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(
      std::string(result.status().message()),
      Catch::Matchers::StartsWith(absl::StrCat("step 2 (distribute): the dispatcher at 127.0.0.1:", port,
                                               " refuses connections: nothing listens there (")));
  CHECK_THAT(
      std::string(result.status().message()),
      Catch::Matchers::EndsWith("check the address and that dispatcherd runs, or give a dispatcher that is "
                                "starting longer with distribute(timeout_ms=...)"));
}

TEST_CASE("service: SIGTERM shuts the daemons down cleanly", "[service]") {
  TestCluster cluster({.num_workers = 1});
  CHECK(CollectInts(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl()})) == Iota(3));
  CHECK(cluster.worker(0).Terminate() == 0);
  // The worker told the dispatcher it left.
  CHECK(cluster.RegisteredWorkers() == 0);
  CHECK(cluster.dispatcher().Terminate() == 0);
}

TEST_CASE("service: a worker shutting down mid-read ends its task at once", "[service]") {
  // A long worker timeout: only the clean-shutdown message can end the task
  // within the test's time.
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--worker-timeout-ms", "600000"},
                       .worker_args = {"--buffer-elements", "4"}});
  DatasetPtr dataset = testing::MustBuild(Dataset::Range(100000).ReadFromService(
      {.service = cluster.ServiceUrl(), .max_outstanding_requests = 4}));
  std::unique_ptr<IteratorBase> iterator = testing::MustIterate(dataset);
  Element e;
  bool end = false;
  REQUIRE(iterator->GetNext(&e, &end).ok());
  CHECK(cluster.worker(0).Terminate() == 0);
  const auto start = std::chrono::steady_clock::now();
  int64_t count = 1;
  absl::Status status;
  while (true) {
    status = iterator->GetNext(&e, &end);
    if (!status.ok() || end) break;
    ++count;
  }
  // The other worker's whole epoch, plus what the first sent before it
  // left; then the read says that the first worker's epoch was cut short.
  CHECK(count >= 100000);
  CHECK(count < 200000);
  CHECK(absl::IsDataLoss(status));
  CHECK_THAT(std::string(status.message()), Contains(", worker shut down) after "));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
}

TEST_CASE("service: daemons reject bad configuration with exit code 2", "[service]") {
  testing::TempDir dir;
  const std::string config = dir.File("dispatcher.yaml");
  WriteFile(config, "prot: 5000\n");
  auto dispatcher = testing::Process::Start({SLUICE_DISPATCHERD, "--config", config}, dir.File("d.log"));
  REQUIRE(dispatcher.ok());
  CHECK((*dispatcher)->Wait(std::chrono::seconds(20)) == 2);
  CHECK_THAT(testing::ReadFileOrEmpty(dir.File("d.log")),
             Contains(config + ":1:1: unknown dispatcher setting 'prot'; did you mean 'port'?"));

  WriteFile(config, "port: 5000\nworker_timeout_ms: 5\n");
  dispatcher = testing::Process::Start({SLUICE_DISPATCHERD, "--config", config}, dir.File("d2.log"));
  REQUIRE(dispatcher.ok());
  CHECK((*dispatcher)->Wait(std::chrono::seconds(20)) == 2);
  CHECK_THAT(testing::ReadFileOrEmpty(dir.File("d2.log")),
             Contains(config + ":2:20: 'worker_timeout_ms' must be in [100, 86400000], got 5"));

  auto worker = testing::Process::Start({SLUICE_WORKERD, "--port", "0"}, dir.File("w.log"));
  REQUIRE(worker.ok());
  CHECK((*worker)->Wait(std::chrono::seconds(20)) == 2);
  CHECK_THAT(testing::ReadFileOrEmpty(dir.File("w.log")), Contains("--dispatcher HOST:PORT is required"));
}

// The worker's tasks, from its status RPC.
std::vector<int64_t> WorkerTasks(const std::string& worker_address) {
  auto stub = proto::WorkerService::NewStub(MakeChannel(worker_address));
  proto::WorkerStatusResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  REQUIRE(stub->GetStatus(&context, proto::WorkerStatusRequest(), &response).ok());
  return {response.tasks().begin(), response.tasks().end()};
}

TEST_CASE("service: the worker's ProcessTask and GetElements RPCs", "[service]") {
  TestCluster cluster({.num_workers = 1});
  const std::string worker = absl::StrCat(
      "127.0.0.1:",
      std::stoi(testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10))));
  auto stub = proto::WorkerService::NewStub(MakeChannel(worker));
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(10); };

  // A task the worker does not have: an empty answer at once, not an error.
  proto::GetElementsRequest get;
  *get.mutable_version() = CurrentVersion();
  get.set_task_id(77);
  get.set_task_secret("read-secret-77");
  get.set_max_elements(8);
  proto::GetElementsResponse got;
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    REQUIRE(stub->GetElements(&context, get, &got).ok());
  }
  CHECK(got.elements_size() == 0);
  CHECK_FALSE(got.end_of_sequence());

  // A task pushed straight to the worker runs, and its elements come back
  // through the ordinary proto stub, in order, with their positions.
  proto::ProcessTaskRequest push;
  *push.mutable_version() = CurrentVersion();
  push.mutable_task()->set_task_id(77);
  push.mutable_task()->set_read_secret("read-secret-77");
  push.mutable_task()->set_iteration_id(1);
  *push.mutable_task()->mutable_dataset() = internal::DefinitionOf(Dataset::Range(5));
  push.mutable_task()->set_processing_mode(proto::PARALLEL_EPOCHS);
  proto::ProcessTaskResponse pushed;
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    REQUIRE(stub->ProcessTask(&context, push, &pushed).ok());
  }
  CHECK(WorkerTasks(worker) == std::vector<int64_t>{77});
  std::vector<int64_t> values;
  get.set_max_elements(2);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!got.end_of_sequence() && std::chrono::steady_clock::now() < give_up) {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    got.Clear();
    REQUIRE(stub->GetElements(&context, get, &got).ok());
    // Each response starts where the ones before it left off.
    if (got.elements_size() > 0) CHECK(got.first_index() == static_cast<int64_t>(values.size()));
    for (const auto& element : got.elements()) {
      absl::StatusOr<Element> decoded = ElementFromProto(element);
      REQUIRE(decoded.ok());
      values.push_back(decoded->components.at(0).values<int64_t>()[0]);
    }
  }
  CHECK(got.end_of_sequence());
  CHECK(values == Iota(5));

  // Both RPCs check the protocol version.
  get.mutable_version()->set_protocol_version(kProtocolVersion + 1);
  push.mutable_version()->set_protocol_version(kProtocolVersion + 1);
  grpc::ClientContext get_context;
  get_context.set_deadline(deadline());
  CHECK(stub->GetElements(&get_context, get, &got).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  grpc::ClientContext push_context;
  push_context.set_deadline(deadline());
  CHECK(stub->ProcessTask(&push_context, push, &pushed).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("service: an abandoned iteration is collected with its worker task, a live one is not",
          "[service]") {
  TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--job-gc-timeout-ms", "300"}});
  const std::string worker = absl::StrCat(
      "127.0.0.1:",
      std::stoi(testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10))));
  auto read_one = [](const std::unique_ptr<IteratorBase>& iterator) {
    Element element;
    bool end = true;
    REQUIRE(iterator->GetNext(&element, &end).ok());
    CHECK_FALSE(end);
  };
  // Two endless jobs: one read and dropped (its iterator releases the
  // iteration), one kept open.
  absl::StatusOr<DatasetPtr> live_dataset = internal::BuildPipeline(
      Dataset::Range(1000).Repeat().ReadFromService({.service = cluster.ServiceUrl(), .job_name = "live"}));
  REQUIRE(live_dataset.ok());
  absl::StatusOr<std::unique_ptr<IteratorBase>> live = (*live_dataset)->MakeIterator(IteratorContext{});
  REQUIRE(live.ok());
  read_one(*live);
  {
    absl::StatusOr<DatasetPtr> dropped =
        internal::BuildPipeline(Dataset::Range(1000).Repeat().ReadFromService(
            {.service = cluster.ServiceUrl(), .job_name = "dropped"}));
    REQUIRE(dropped.ok());
    absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*dropped)->MakeIterator(IteratorContext{});
    REQUIRE(iterator.ok());
    read_one(*iterator);
    CHECK(WorkerTasks(worker) == std::vector<int64_t>{1, 2});
  }
  // Collected after 300 ms without a client; the worker drops the task on
  // its next heartbeat (100 ms).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline && WorkerTasks(worker) != std::vector<int64_t>{1}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(WorkerTasks(worker) == std::vector<int64_t>{1});
  // Three timeouts later the live iteration is still there and reads on.
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  CHECK(WorkerTasks(worker) == std::vector<int64_t>{1});
  for (int i = 0; i < 100; ++i) read_one(*live);
}

TEST_CASE("service: a protocol version mismatch is FailedPrecondition", "[service]") {
  TestCluster cluster({.num_workers = 0});
  auto stub = proto::DispatcherService::NewStub(MakeChannel(cluster.DispatcherAddress()));
  proto::GetWorkersRequest request;
  request.mutable_version()->set_protocol_version(kProtocolVersion + 1);
  proto::GetWorkersResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status status = stub->GetWorkers(&context, request, &response);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(status.error_message() == absl::StrCat("protocol version mismatch: the peer speaks version ",
                                               kProtocolVersion + 1, ", this server speaks ",
                                               kProtocolVersion, "; run the same Sluice release on both"));
}

}  // namespace
}  // namespace sluice
