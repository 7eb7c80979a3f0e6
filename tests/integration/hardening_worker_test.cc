// Integration tests of workers that contain failures: a
// pipeline that runs out of memory or throws fails its task and the
// iteration, with the worker's words, and the worker serves the next read;
// and daemons that refuse a port in use or a bad setting at startup.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "pipeline/definition_limits.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::ReadToEnd;
using testing::TestCluster;

TEST_CASE("hardening worker: a pipeline past max_memory_bytes fails its iteration, and the worker serves on",
          "[service][hardening][worker]") {
  TestCluster cluster({.num_workers = 1, .worker_args = {"--max-memory-bytes", "2000000000"}});
  // An endless input into batches of batches, each within the definition
  // limits (pipeline/definition_limits.h), 2^48 rows in all: the batch
  // grows until an allocation fails at the worker's limit.
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  const absl::Status status = ReadToEnd(
      internal::ReadFromService(Dataset::Range(3).Repeat().Batch(kMaxBatchSize).Batch(kMaxBatchSize), op),
      nullptr);
  INFO(status.ToString());
  CHECK(absl::IsResourceExhausted(status));
  // The step that failed (range or batch, whichever allocated last) comes
  // first.
  CHECK_THAT(
      std::string(status.message()),
      Contains("): out of memory (an allocation failed: std::bad_alloc); the worker's max_memory_bytes is "
               "2000000000: lower batch, shuffle or buffer sizes, or raise max_memory_bytes "
               "(--max-memory-bytes)"));
  // A line that never ends fails at text_line's line limit, long before
  // the worker's (a sparse file of zeros: /dev/zero is not a regular file,
  // and file sources refuse it before reading).
  testing::TempDir zeros_dir;
  const std::string zeros_path = zeros_dir.File("zeros.txt");
  testing::WriteFile(zeros_path, "");
  std::filesystem::resize_file(zeros_path, (int64_t{64} << 20) + 1024);
  proto::DistributeOp zeros_op = op;
  const absl::Status zeros =
      ReadToEnd(internal::ReadFromService(Dataset::TextLine({zeros_path}), zeros_op), nullptr);
  INFO(zeros.ToString());
  CHECK(absl::IsInvalidArgument(zeros));
  CHECK_THAT(std::string(zeros.message()),
             Contains("'" + zeros_path +
                      "': line 1 is longer than 67108864 bytes, the longest line text_line reads"));
  // The worker lives on and serves the next read whole.
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl(),
                                                       .processing_mode = ProcessingMode::kDistributedEpoch}),
                    &values)
              .ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(cluster.RegisteredWorkers() == 1);
  // The dispatcher heard of the failure: as the iteration's, or, when the
  // reader let the iteration go before the worker's report came in, after
  // (with the worker's next update, which may come after the reads).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (testing::ReadFileOrEmpty(cluster.dispatcher().log_path()).find("task 1 on worker ") ==
             std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dispatcher().log_path()), Contains("task 1 on worker "));
}

TEST_CASE("hardening worker: a second daemon on a port in use exits 2 naming the address",
          "[service][hardening][worker]") {
  TestCluster cluster({.num_workers = 1});
  const std::string dispatcher_port =
      cluster.DispatcherAddress().substr(cluster.DispatcherAddress().rfind(':') + 1);
  const std::string worker_port =
      testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  REQUIRE(!worker_port.empty());
  struct Case {
    std::vector<std::string> argv;
    std::string port;
  };
  const std::vector<Case> cases = {
      {{SLUICE_DISPATCHERD, "--port", dispatcher_port, "--bind-address", "127.0.0.1"}, dispatcher_port},
      {{SLUICE_WORKERD, "--dispatcher", cluster.DispatcherAddress(), "--port",
        std::to_string(std::stoi(worker_port)), "--bind-address", "127.0.0.1"},
       std::to_string(std::stoi(worker_port))},
  };
  for (const Case& c : cases) {
    const std::string log = cluster.dir().File("second.log");
    auto second = testing::Process::Start(c.argv, log);
    REQUIRE(second.ok());
    CHECK((*second)->Wait(std::chrono::seconds(20)) == 2);
    CHECK_THAT(testing::ReadFileOrEmpty(log), Contains("cannot listen on 127.0.0.1:" + c.port +
                                                       ": the port is in use, or the address is not one of "
                                                       "this host's"));
  }
  // The first ones still serve.
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("hardening worker: bad settings exit 2 naming the file and line or the flag",
          "[service][hardening][worker]") {
  testing::TempDir dir;
  const std::string config = dir.File("worker.yaml");
  testing::WriteFile(config, "dispatcher: 127.0.0.1:1\nlog_level: loud\n");
  struct Case {
    std::vector<std::string> argv;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{SLUICE_WORKERD, "--config", config},
       config + ":2:12: 'log_level': unknown log level 'loud' (valid: trace, debug, info, warn, error, off)"},
      {{SLUICE_WORKERD, "--dispatcher", "127.0.0.1:1", "--advertised-address", "garbage"},
       "--advertised-address: 'garbage' is not HOST:PORT"},
      {{SLUICE_WORKERD, "--dispatcher", "garbage"},
       "--dispatcher: invalid service address 'garbage': expected HOST:PORT or grpc://HOST:PORT"},
  };
  for (const Case& c : cases) {
    const std::string log = dir.File("w.log");
    auto worker = testing::Process::Start(c.argv, log);
    REQUIRE(worker.ok());
    CHECK((*worker)->Wait(std::chrono::seconds(20)) == 2);
    CHECK_THAT(testing::ReadFileOrEmpty(log), Contains(c.message));
  }
}

TEST_CASE(
    "hardening worker: workerd given a worker's port as --dispatcher exits 1 saying it is the wrong server",
    "[service][hardening][worker]") {
  TestCluster cluster({.num_workers = 1});
  const std::string port = testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  REQUIRE(!port.empty());
  const std::string log = cluster.dir().File("misdirected.log");
  const auto start = std::chrono::steady_clock::now();
  auto worker =
      testing::Process::Start({SLUICE_WORKERD, "--dispatcher", absl::StrCat("127.0.0.1:", std::stoi(port)),
                               "--port", "0", "--bind-address", "127.0.0.1"},
                              log);
  REQUIRE(worker.ok());
  CHECK((*worker)->Wait(std::chrono::seconds(20)) == 1);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  const std::string output = testing::ReadFileOrEmpty(log);
  INFO(output);
  CHECK_THAT(output,
             Contains("workerd: the server there does not serve this call: is the address that of the "
                      "right kind of Sluice server (a dispatcher, not a worker, or the reverse) and of "
                      "the same release?\n"));
  // The worker it was pointed at serves on.
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("hardening worker: many short reads do not pile up task threads", "[service][hardening][worker]") {
  TestCluster cluster({.num_workers = 1});
  const pid_t worker = cluster.worker(0).pid();
  auto read_once = [&] {
    std::vector<int64_t> values;
    REQUIRE(
        ReadToEnd(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl(),
                                                     .processing_mode = ProcessingMode::kDistributedEpoch}),
                  &values)
            .ok());
    REQUIRE(values.size() == 3);
  };
  for (int i = 0; i < 10; ++i) read_once();
  const int64_t size_before = testing::ProcStatus(worker, "VmSize");
  for (int i = 0; i < 100; ++i) read_once();
  const int64_t size_after = testing::ProcStatus(worker, "VmSize");
  const int64_t threads_after = testing::ProcStatus(worker, "Threads");
  CAPTURE(size_before, size_after, threads_after);
  // Each task's thread kept its 8 MiB stack until job GC (5 minutes): 100
  // reads grew the worker by 800 MB.
  CHECK(size_after - size_before < 200 * 1024);
  CHECK(threads_after < 60);
}

TEST_CASE("hardening worker: an element too large for a response names its size, the limit and the fix",
          "[service][hardening][worker]") {
  TestCluster cluster({.num_workers = 1});
  // One batch of 10 batches of 2^22 int64: 335,544,320 bytes (up to
  // 335,544,388 on the wire, as ElementWireBound counts), past gRPC's 256 MiB.
  const absl::Status status = ReadToEnd(
      Dataset::Range(10 << 22).Batch(1 << 22).Batch(10).ReadFromService({.service = cluster.ServiceUrl()}),
      nullptr);
  INFO(status.ToString());
  CHECK(absl::IsResourceExhausted(status));
  CHECK_THAT(
      std::string(status.message()),
      Contains("task 1: element 0 takes up to 335544388 bytes, more than the 264241152 bytes a response can "
               "carry (gRPC's "
               "268435456-byte message limit less framing): make elements smaller before distribute (a "
               "smaller batch_size, or batch after distribute)"));
  // Smaller elements of the same pipeline still go, several per response.
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("hardening worker: a response never gathers elements past the message limit",
          "[service][hardening][worker]") {
  // Two elements of 136,000,022 bytes each fit a response alone but not
  // together: asked for both, the worker sends one, then the other. The
  // task is pushed straight to the worker, so the dispatcher, which does
  // not know it, drops it at the next heartbeat (tried again if so): the
  // heartbeats are 10 s apart, since making the elements takes about 2 s.
  TestCluster cluster({.num_workers = 1,
                       .dispatcher_args = {"--worker-timeout-ms", "60000"},
                       .worker_args = {"--heartbeat-interval-ms", "10000"}});
  const std::string port = testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  auto worker = proto::WorkerService::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", std::stoi(port))));
  auto call = [](auto method) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return method(&context);
  };
  std::vector<int64_t> first_indexes;
  for (int64_t task_id = 1000; task_id < 1005 && first_indexes.size() < 2; ++task_id) {
    first_indexes.clear();
    proto::ProcessTaskRequest push;
    *push.mutable_version() = CurrentVersion();
    push.mutable_task()->set_task_id(task_id);
    push.mutable_task()->set_read_secret("read-secret");
    push.mutable_task()->set_processing_mode(proto::PARALLEL_EPOCHS);
    *push.mutable_task()->mutable_dataset() =
        internal::DefinitionOf(Dataset::Range(34000000).Batch(17000000));
    proto::ProcessTaskResponse pushed;
    REQUIRE(call([&](grpc::ClientContext* c) { return worker->ProcessTask(c, push, &pushed); }).ok());
    proto::WorkerStatusResponse status;
    for (int i = 0; i < 400; ++i) {
      status.Clear();
      REQUIRE(call([&](grpc::ClientContext* c) {
                return worker->GetStatus(c, proto::WorkerStatusRequest(), &status);
              }).ok());
      if (status.buffered_elements() == 2 || status.tasks_size() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (status.buffered_elements() != 2) continue;
    for (int i = 0; i < 2; ++i) {
      proto::GetElementsRequest get;
      *get.mutable_version() = CurrentVersion();
      get.set_task_id(task_id);
      get.set_task_secret("read-secret");
      get.set_max_elements(2);
      proto::GetElementsResponse got;
      const grpc::Status rpc =
          call([&](grpc::ClientContext* c) { return worker->GetElements(c, get, &got); });
      INFO(rpc.error_message());
      REQUIRE(rpc.ok());
      if (got.elements_size() == 0) break;  // dropped meanwhile
      CHECK(got.elements_size() == 1);
      first_indexes.push_back(got.first_index());
    }
  }
  CHECK(first_indexes == std::vector<int64_t>{0, 1});
}

TEST_CASE("hardening worker: GetElements and ProcessTask refuse fields out of range, naming them",
          "[service][hardening][worker]") {
  TestCluster cluster({.num_workers = 1});
  const std::string port = testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  REQUIRE(!port.empty());
  auto worker = proto::WorkerService::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", std::stoi(port))));
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(5); };

  struct GetCase {
    std::function<void(proto::GetElementsRequest*)> edit;
    std::string message;
  };
  const std::vector<GetCase> get_cases = {
      {[](auto* r) { r->set_task_id(-1); }, "GetElements: task_id must be >= 0, got -1"},
      {[](auto* r) { r->set_max_elements(-5); },
       "GetElements: max_elements must be in [0, 65536] (0 asks for one), got -5"},
      {[](auto* r) { r->set_compression(static_cast<proto::WireCompression>(99)); },
       "GetElements: compression must be COMPRESSION_NONE (0), COMPRESSION_SNAPPY (1) or COMPRESSION_ZSTD "
       "(2), "
       "got 99"},
      {[](auto* r) { r->set_consumer_index(-2); }, "GetElements: consumer_index must be >= 0, got -2"},
      {[](auto* r) { r->set_round(INT64_MIN); }, "GetElements: round must be >= 0, got -9223372036854775808"},
  };
  for (const GetCase& c : get_cases) {
    proto::GetElementsRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_task_id(7);
    request.set_max_elements(1);
    c.edit(&request);
    proto::GetElementsResponse response;
    grpc::ClientContext context;
    context.set_deadline(deadline());
    const grpc::Status status = worker->GetElements(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message() == c.message);
  }

  struct TaskCase {
    std::function<void(proto::TaskDef*)> edit;
    std::string message;
  };
  const std::vector<TaskCase> task_cases = {
      {[](auto* t) { t->set_task_id(0); }, "ProcessTask: task.task_id must be > 0, got 0"},
      {[](auto* t) { t->set_iteration_id(-1); }, "ProcessTask: task.iteration_id must be >= 0, got -1"},
      {[](auto* t) { t->set_processing_mode(static_cast<proto::ProcessingMode>(99)); },
       "ProcessTask: task.processing_mode must be PARALLEL_EPOCHS (1) or DISTRIBUTED_EPOCH (2), got 99"},
      {[](auto* t) { t->set_sharding_policy(static_cast<proto::ShardingPolicy>(99)); },
       "ProcessTask: task.sharding_policy must be a ShardingPolicy (0 to 6), got 99"},
      {[](auto* t) {
         t->set_num_shards(2);
         t->set_shard_index(2);
       },
       "ProcessTask: task.shard_index must be in [0, num_shards 2), got 2"},
      {[](auto* t) { t->clear_read_secret(); },
       "ProcessTask: task.read_secret is empty (the dispatcher gives every task one)"},
      {[](auto* t) { t->set_num_consumers(int64_t{1} << 62); },
       "ProcessTask: task.num_consumers must be in [0, 65536], got 4611686018427387904"},
  };
  for (const TaskCase& c : task_cases) {
    proto::ProcessTaskRequest request;
    *request.mutable_version() = CurrentVersion();
    proto::TaskDef* task = request.mutable_task();
    task->set_task_id(1000);
    task->set_read_secret("read-secret");
    task->set_iteration_id(1);
    task->set_processing_mode(proto::PARALLEL_EPOCHS);
    *task->mutable_dataset() = internal::DefinitionOf(Dataset::Range(3));
    c.edit(task);
    proto::ProcessTaskResponse response;
    grpc::ClientContext context;
    context.set_deadline(deadline());
    const grpc::Status status = worker->ProcessTask(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message() == c.message);
  }
  // What protobuf cannot parse is refused saying why, not with gRPC's
  // INTERNAL and an empty message.
  Dataset nested = Dataset::Range(2);
  for (int i = 0; i < 40; ++i) nested = Dataset::Zip({nested, Dataset::Range(2)});
  struct ParseCase {
    proto::DatasetDef dataset;
    std::string message;
  };
  proto::DatasetDef not_utf8 = internal::DefinitionOf(Dataset::Range(3));
  not_utf8.add_plugins("\xff");
  const std::vector<ParseCase> parse_cases = {
      {internal::DefinitionOf(nested),
       "ProcessTask: the request nests messages deeper than protobuf's limit of 100 (zip or interleave "
       "pipelines inside each other add three levels each): nest fewer pipelines"},
      {not_utf8,
       "ProcessTask: the request does not parse as a sluice.proto.ProcessTaskRequest (malformed bytes, a "
       "string "
       "field that is not UTF-8, or nesting past 10000 levels)"},
  };
  for (const ParseCase& c : parse_cases) {
    proto::ProcessTaskRequest request;
    *request.mutable_version() = CurrentVersion();
    request.mutable_task()->set_task_id(1000);
    request.mutable_task()->set_processing_mode(proto::PARALLEL_EPOCHS);
    *request.mutable_task()->mutable_dataset() = c.dataset;
    proto::ProcessTaskResponse response;
    grpc::ClientContext context;
    context.set_deadline(deadline());
    const grpc::Status status = worker->ProcessTask(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message() == c.message);
  }
  // The worker runs none of them, and serves a read whole.
  proto::WorkerStatusResponse worker_status;
  grpc::ClientContext context;
  context.set_deadline(deadline());
  REQUIRE(worker->GetStatus(&context, proto::WorkerStatusRequest(), &worker_status).ok());
  CHECK(worker_status.tasks_size() == 0);
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2});
}

}  // namespace
}  // namespace sluice
