// A fuzz-style test of both daemons: with a fixed seed, a few
// thousand random and boundary-valued requests to every RPC of a real
// dispatcher and worker, and a thousand byte strings each that protobuf
// may not parse; then both must still be up and a normal read must
// give the exact answer. A call that does not return within its deadline,
// and an UNKNOWN or INTERNAL error with no message, fail the test with the
// request that caused it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/generic/generic_stub.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/security_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using testing::TestCluster;

constexpr uint64_t kSeed = 14;
constexpr int kDispatcherRequests = 3000;
constexpr int kWorkerRequests = 1500;
// Of bytes that may not parse, to each daemon.
constexpr int kRawRequests = 1000;
constexpr auto kCallDeadline = std::chrono::seconds(2);
constexpr char kFuzzTaskSecret[] = "fuzz-task-secret";

class Fuzzer {
 public:
  explicit Fuzzer(std::set<std::string> protected_addresses)
      : random_(kSeed), protected_(std::move(protected_addresses)) {}

  int64_t Int64() {
    static const std::vector<int64_t> kEdges = {0,
                                                1,
                                                -1,
                                                2,
                                                int64_t{1} << 26,
                                                int64_t{1} << 40,
                                                int64_t{1} << 62,
                                                std::numeric_limits<int64_t>::max(),
                                                std::numeric_limits<int64_t>::min()};
    return random_() % 4 == 0 ? static_cast<int64_t>(random_()) : kEdges[random_() % kEdges.size()];
  }
  int32_t Int32() {
    static const std::vector<int32_t> kEdges = {
        0, 1, -5, 99, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
    return random_() % 4 == 0 ? static_cast<int32_t>(random_()) : kEdges[random_() % kEdges.size()];
  }
  // Ids small enough to hit real objects now and then.
  int64_t Id() { return random_() % 2 == 0 ? static_cast<int64_t>(random_() % 8) : Int64(); }
  bool Bool() { return random_() % 2 == 0; }
  std::string String() {
    static const std::vector<std::string> kEdges = {"", "x", std::string(65536, 'a'),
                                                    // A NUL and non-ASCII, still UTF-8: proto3 string
                                                    // fields must be, or gRPC refuses the message itself.
                                                    std::string("nul\0byte \xc3\xa9", 11), "garbage",
                                                    "127.0.0.1:1", ":0", "w:99999", "grpc://127.0.0.1:2",
                                                    "1000"};
    return kEdges[random_() % kEdges.size()];
  }
  // A worker address that is never one of the real workers: shutting one
  // down or finishing its tasks is what a real request may do, and would
  // make the read at the end legitimately different.
  std::string Address() {
    std::string address = String();
    return protected_.contains(address) ? "127.0.0.1:1" : address;
  }
  proto::VersionInfo Version() {
    proto::VersionInfo version = CurrentVersion();
    if (random_() % 10 == 0) version.set_protocol_version(Int32());
    return version;
  }
  // Definitions with extreme arguments, unknown names and deep nesting.
  proto::DatasetDef Definition() {
    switch (random_() % 8) {
      case 0:
        return internal::DefinitionOf(Dataset::Range(Int64()));
      case 1:
        return internal::DefinitionOf(Dataset::Range(3).Batch(std::max<int64_t>(1, Int64())));
      case 2:
        return internal::DefinitionOf(Dataset::Range(3).Shuffle(Int64()));
      case 3: {
        proto::DatasetDef def = internal::DefinitionOf(Dataset::Range(3).Interleave(Dataset::Range(2)));
        def.mutable_steps(1)->mutable_interleave()->set_cycle_length(Int64());
        return def;
      }
      case 4: {
        // Deep, within what protobuf parses or past it (the daemons parse
        // requests themselves and name the depth).
        Dataset nested = Dataset::Range(2);
        const int depth = Bool() ? 28 : 40;
        for (int i = 0; i < depth; ++i) nested = Dataset::Zip({nested, Dataset::Range(2)});
        return internal::DefinitionOf(nested);
      }
      case 5:
        return internal::DefinitionOf(Dataset::Range(3).Map("no_such_function"));
      case 6: {
        proto::DatasetDef def;
        def.add_steps();  // a step with no op
        return def;
      }
      default:
        return proto::DatasetDef();
    }
  }
  std::mt19937_64& random() { return random_; }

 private:
  std::mt19937_64 random_;
  const std::set<std::string> protected_;
};

// One RPC: its name and a call that sends a fresh random request with the
// given context, returning the status and the request's text.
using Rpc = std::function<grpc::Status(grpc::ClientContext*, std::string* request_text)>;

// Runs `count` calls picked from `rpcs`; the failures, one line each.
// `accepted` counts the calls that succeeded, so that a test can see the
// fuzz reached past the first checks.
std::vector<std::string> Barrage(Fuzzer& fuzzer, const std::vector<std::pair<std::string, Rpc>>& rpcs,
                                 int count, int* accepted) {
  std::vector<std::string> failures;
  for (int i = 0; i < count; ++i) {
    const auto& [name, rpc] = rpcs[fuzzer.random()() % rpcs.size()];
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    std::string request;
    const grpc::Status status = rpc(&context, &request);
    const bool hang = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    const bool silent = (status.error_code() == grpc::StatusCode::UNKNOWN ||
                         status.error_code() == grpc::StatusCode::INTERNAL) &&
                        status.error_message().empty();
    const bool gone = status.error_code() == grpc::StatusCode::UNAVAILABLE;
    *accepted += status.ok() ? 1 : 0;
    if (hang || silent || gone) {
      failures.push_back(absl::StrCat("call ", i, " ", name, " -> ", status.error_code(), " '",
                                      status.error_message(), "': ", request.substr(0, 300)));
    }
  }
  return failures;
}

// Bytes sent as the request of `method` (a full gRPC method name) that
// protobuf may not parse at all: random bytes, and a valid request
// truncated, with bytes flipped, or with bytes appended. `seeds` holds
// valid requests of each method.
std::vector<std::string> RawBarrage(Fuzzer& fuzzer, const std::shared_ptr<grpc::Channel>& channel,
                                    const std::vector<std::pair<std::string, std::string>>& seeds, int count,
                                    int* unparsed) {
  grpc::GenericStub stub(channel);
  std::vector<std::string> failures;
  auto& random = fuzzer.random();
  for (int i = 0; i < count; ++i) {
    const auto& [method, seed] = seeds[random() % seeds.size()];
    std::string bytes = seed;
    switch (random() % 5) {
      case 0:
        bytes.resize(random() % 64);
        for (char& c : bytes) c = static_cast<char>(random());
        break;
      case 1:
        bytes.resize(bytes.empty() ? 0 : random() % bytes.size());
        break;
      case 2:
        for (int flips = 1 + random() % 4; flips > 0 && !bytes.empty(); --flips) {
          bytes[random() % bytes.size()] = static_cast<char>(random());
        }
        break;
      case 3:
        for (int more = 1 + random() % 16; more > 0; --more) bytes.push_back(static_cast<char>(random()));
        break;
      default:
        // A string that is not UTF-8: field 1 of a nested message, or a
        // top-level string field, depending on the method.
        bytes += std::string("\x0a\x02\xff\xfe", 4);
    }
    grpc::Slice slice(bytes.data(), bytes.size());
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status status) { done.set_value(std::move(status)); });
    const grpc::Status status = done.get_future().get();
    const bool hang = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    const bool silent = (status.error_code() == grpc::StatusCode::UNKNOWN ||
                         status.error_code() == grpc::StatusCode::INTERNAL) &&
                        status.error_message().empty();
    const bool gone = status.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
        status.error_message().find(": the request does not parse as a sluice.proto.") != std::string::npos) {
      ++*unparsed;
    }
    if (hang || silent || gone) {
      failures.push_back(absl::StrCat("raw call ", i, " ", method, " -> ", status.error_code(), " '",
                                      status.error_message(), "': ", absl::CHexEscape(bytes.substr(0, 100))));
    }
  }
  return failures;
}

// A valid request of every method of `service`, with the current version
// where the request has one: what RawBarrage mutates.
std::vector<std::pair<std::string, std::string>> Seeds(const std::string& service) {
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  REQUIRE(descriptor != nullptr);
  std::vector<std::pair<std::string, std::string>> seeds;
  for (int m = 0; m < descriptor->method_count(); ++m) {
    const google::protobuf::MethodDescriptor* method = descriptor->method(m);
    std::unique_ptr<google::protobuf::Message> request(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(method->input_type())->New());
    if (const auto* version = method->input_type()->FindFieldByName("version"); version != nullptr) {
      request->GetReflection()->MutableMessage(request.get(), version)->CopyFrom(CurrentVersion());
    }
    seeds.emplace_back(absl::StrCat("/", service, "/", method->name()), request->SerializeAsString());
  }
  return seeds;
}

template <typename Request>
std::string Text(const Request& request) {
  return request.ShortDebugString();
}

std::vector<std::pair<std::string, Rpc>> DispatcherRpcs(proto::DispatcherService::Stub& stub, Fuzzer& f) {
  std::vector<std::pair<std::string, Rpc>> rpcs;
  rpcs.emplace_back("GetVersion", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetVersionRequest request;
    proto::GetVersionResponse response;
    *text = Text(request);
    return stub.GetVersion(c, request, &response);
  });
  rpcs.emplace_back("GetOrRegisterDataset", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetOrRegisterDatasetRequest request;
    *request.mutable_version() = f.Version();
    *request.mutable_dataset() = f.Definition();
    if (f.Bool()) request.set_dataset_id(f.String());
    proto::GetOrRegisterDatasetResponse response;
    *text = Text(request);
    return stub.GetOrRegisterDataset(c, request, &response);
  });
  rpcs.emplace_back("GetDatasetInfo", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetDatasetInfoRequest request;
    *request.mutable_version() = f.Version();
    request.set_dataset_id(f.String());
    proto::GetDatasetInfoResponse response;
    *text = Text(request);
    return stub.GetDatasetInfo(c, request, &response);
  });
  rpcs.emplace_back("GetOrCreateJob", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetOrCreateJobRequest request;
    *request.mutable_version() = f.Version();
    proto::JobParams* params = request.mutable_params();
    params->set_dataset_id(f.Bool() ? "1000" : f.String());
    params->set_processing_mode(static_cast<proto::ProcessingMode>(f.Bool() ? f.random()() % 3 : f.Int32()));
    params->set_sharding_policy(static_cast<proto::ShardingPolicy>(f.Bool() ? f.random()() % 7 : f.Int32()));
    if (f.Bool()) params->set_job_name(f.String());
    params->set_exactly_once(f.Bool());
    if (f.Bool()) params->set_num_consumers(f.Int64());
    if (f.random()() % 8 == 0) params->add_static_workers(f.String());
    proto::GetOrCreateJobResponse response;
    *text = Text(request);
    return stub.GetOrCreateJob(c, request, &response);
  });
  rpcs.emplace_back("GetOrCreateIteration", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetOrCreateIterationRequest request;
    *request.mutable_version() = f.Version();
    request.set_job_id(f.Id());
    request.set_repetition(f.Int64());
    request.set_consumer_index(f.Int64());
    proto::GetOrCreateIterationResponse response;
    *text = Text(request);
    return stub.GetOrCreateIteration(c, request, &response);
  });
  rpcs.emplace_back("ClientHeartbeat", [&](grpc::ClientContext* c, std::string* text) {
    proto::ClientHeartbeatRequest request;
    *request.mutable_version() = f.Version();
    request.set_iteration_client_id(f.Id());
    request.set_client_secret(f.String());
    for (int i = 0; i < 3; ++i) {
      if (f.Bool()) request.add_completed_tasks(f.Id());
      if (f.Bool()) request.add_completed_splits(f.Int64());
      if (f.Bool()) request.add_unreachable_workers(f.Address());
    }
    request.set_current_round(f.Int64());
    proto::ClientHeartbeatResponse response;
    *text = Text(request);
    return stub.ClientHeartbeat(c, request, &response);
  });
  rpcs.emplace_back("ReleaseIterationClient", [&](grpc::ClientContext* c, std::string* text) {
    proto::ReleaseIterationClientRequest request;
    *request.mutable_version() = f.Version();
    request.set_iteration_client_id(f.Id());
    request.set_client_secret(f.String());
    proto::ReleaseIterationClientResponse response;
    *text = Text(request);
    return stub.ReleaseIterationClient(c, request, &response);
  });
  rpcs.emplace_back("WorkerHeartbeat", [&](grpc::ClientContext* c, std::string* text) {
    proto::WorkerHeartbeatRequest request;
    *request.mutable_version() = f.Version();
    request.set_worker_address(f.Address());
    if (f.Bool()) request.add_tags(f.String());
    if (f.Bool()) request.add_current_tasks(f.Id());
    request.set_incarnation(f.String());
    proto::WorkerHeartbeatResponse response;
    *text = Text(request);
    return stub.WorkerHeartbeat(c, request, &response);
  });
  rpcs.emplace_back("WorkerUpdates", [&](grpc::ClientContext* c, std::string* text) {
    proto::WorkerUpdatesRequest request;
    *request.mutable_version() = f.Version();
    request.set_worker_address(f.Address());
    if (f.Bool()) request.add_finished_tasks(f.Id());
    if (f.Bool()) {
      auto* failure = request.add_failed_tasks();
      failure->set_task_id(f.Id());
      failure->set_code(f.Int32());
      failure->set_message(f.String());
    }
    proto::WorkerUpdatesResponse response;
    *text = Text(request);
    return stub.WorkerUpdates(c, request, &response);
  });
  rpcs.emplace_back("WorkerShutdown", [&](grpc::ClientContext* c, std::string* text) {
    proto::WorkerShutdownRequest request;
    *request.mutable_version() = f.Version();
    request.set_worker_address(f.Address());
    proto::WorkerShutdownResponse response;
    *text = Text(request);
    return stub.WorkerShutdown(c, request, &response);
  });
  rpcs.emplace_back("GetSplits", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetSplitsRequest request;
    *request.mutable_version() = f.Version();
    request.set_iteration_id(f.Id());
    request.set_task_id(f.Id());
    request.set_max_splits(f.Int32());
    request.set_request_id(f.Int64());
    proto::GetSplitsResponse response;
    *text = Text(request);
    return stub.GetSplits(c, request, &response);
  });
  rpcs.emplace_back("GetWorkers", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetWorkersRequest request;
    *request.mutable_version() = f.Version();
    proto::GetWorkersResponse response;
    *text = Text(request);
    return stub.GetWorkers(c, request, &response);
  });
  rpcs.emplace_back("GetStatus", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetStatusRequest request;
    *request.mutable_version() = f.Version();
    proto::StatusSnapshot response;
    *text = Text(request);
    return stub.GetStatus(c, request, &response);
  });
  return rpcs;
}

std::vector<std::pair<std::string, Rpc>> WorkerRpcs(proto::WorkerService::Stub& stub, Fuzzer& f) {
  std::vector<std::pair<std::string, Rpc>> rpcs;
  rpcs.emplace_back("GetElements", [&](grpc::ClientContext* c, std::string* text) {
    proto::GetElementsRequest request;
    *request.mutable_version() = f.Version();
    request.set_task_id(f.Id());
    // The fuzzer's own tasks' secret half the time, so that their reads go
    // past the capability check.
    request.set_task_secret(f.Bool() ? kFuzzTaskSecret : f.String());
    request.set_max_elements(f.Int32());
    request.set_compression(static_cast<proto::WireCompression>(f.Bool() ? f.random()() % 3 : f.Int32()));
    request.set_consumer_index(f.Int64());
    request.set_round(f.Int64());
    request.set_others_past_round(f.Bool());
    proto::GetElementsResponse response;
    *text = Text(request);
    return stub.GetElements(c, request, &response);
  });
  rpcs.emplace_back("ProcessTask", [&](grpc::ClientContext* c, std::string* text) {
    proto::ProcessTaskRequest request;
    *request.mutable_version() = f.Version();
    proto::TaskDef* task = request.mutable_task();
    // Far from the dispatcher's own ids, so that no real task is replaced.
    task->set_task_id(1000000 + f.random()() % 1000);
    task->set_iteration_id(f.Int64());
    task->set_read_secret(f.random()() % 4 == 0 ? f.String() : kFuzzTaskSecret);
    *task->mutable_dataset() = f.Definition();
    task->set_processing_mode(static_cast<proto::ProcessingMode>(f.random()() % 2 ? 1 : f.Int32()));
    task->set_sharding_policy(static_cast<proto::ShardingPolicy>(f.Int32()));
    task->set_num_shards(f.Int32());
    task->set_shard_index(f.Int32());
    task->set_num_consumers(f.random()() % 4 == 0 ? f.Int64() : 0);
    proto::ProcessTaskResponse response;
    *text = Text(request).substr(0, 300);
    return stub.ProcessTask(c, request, &response);
  });
  rpcs.emplace_back("GetStatus", [&](grpc::ClientContext* c, std::string* text) {
    proto::WorkerStatusRequest request;
    proto::WorkerStatusResponse response;
    *text = Text(request);
    return stub.GetStatus(c, request, &response);
  });
  return rpcs;
}

TEST_CASE("fuzz: random and boundary requests to every RPC leave both daemons up and reads exact",
          "[service][hardening][fuzz]") {
  INFO("seed " << kSeed);
  TestCluster cluster({.num_workers = 1,
                       .dispatcher_args = {"--worker-timeout-ms", "1000"},
                       .worker_args = {"--max-memory-bytes", "6000000000"}});
  const std::string port = testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  REQUIRE(!port.empty());
  const int worker_port = std::stoi(port);
  // The real worker, as it advertises itself and as a test would name it.
  std::set<std::string> real = {absl::StrCat("127.0.0.1:", worker_port),
                                absl::StrCat("localhost:", worker_port)};
  auto status = proto::DispatcherService::NewStub(MakeChannel(cluster.DispatcherAddress()));
  {
    proto::GetWorkersRequest request;
    *request.mutable_version() = CurrentVersion();
    proto::GetWorkersResponse response;
    grpc::ClientContext context;
    REQUIRE(status->GetWorkers(&context, request, &response).ok());
    for (const auto& worker : response.workers()) real.insert(worker.address());
  }
  Fuzzer fuzzer(real);
  auto dispatcher = proto::DispatcherService::NewStub(MakeChannel(cluster.DispatcherAddress()));
  auto worker = proto::WorkerService::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", worker_port)));
  const auto start = std::chrono::steady_clock::now();
  int dispatcher_accepted = 0;
  int worker_accepted = 0;
  std::vector<std::string> failures =
      Barrage(fuzzer, DispatcherRpcs(*dispatcher, fuzzer), kDispatcherRequests, &dispatcher_accepted);
  const std::vector<std::string> worker_failures =
      Barrage(fuzzer, WorkerRpcs(*worker, fuzzer), kWorkerRequests, &worker_accepted);
  failures.insert(failures.end(), worker_failures.begin(), worker_failures.end());
  // Requests protobuf cannot parse: each daemon parses them itself and
  // says why (before, gRPC answered INTERNAL with no message).
  for (const auto& [address, service] :
       {std::pair{cluster.DispatcherAddress(), std::string("sluice.proto.DispatcherService")},
        std::pair{absl::StrCat("127.0.0.1:", worker_port), std::string("sluice.proto.WorkerService")}}) {
    int unparsed = 0;
    const std::vector<std::string> raw =
        RawBarrage(fuzzer, MakeChannel(address), Seeds(service), kRawRequests, &unparsed);
    failures.insert(failures.end(), raw.begin(), raw.end());
    // Many of them reached the daemon's own parse and were named there.
    CAPTURE(service, unparsed);
    CHECK(unparsed > 200);
  }
  INFO("barrage took " << std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count()
                       << " ms");
  std::string report;
  for (const std::string& failure : failures) absl::StrAppend(&report, failure, "\n");
  INFO(report);
  CHECK(failures.empty());
  // Some requests got through the checks to the logic behind them.
  CAPTURE(dispatcher_accepted, worker_accepted);
  CHECK(dispatcher_accepted > 300);
  CHECK(worker_accepted > 100);

  // Both still up: the workers the fuzz registered at random addresses go
  // silent and are dropped after --worker-timeout-ms, leaving the real one.
  cluster.WaitForRegisteredWorkers(1, std::chrono::seconds(20));
  CHECK(cluster.RegisteredWorkers() == 1);
  absl::StatusOr<std::vector<Element>> epoch =
      Dataset::Range(1000)
          .ReadFromService(
              {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch})
          .Collect();
  INFO(epoch.status().ToString());
  REQUIRE(epoch.ok());
  std::vector<int64_t> values;
  for (const Element& e : *epoch) values.push_back(e.components.at(0).data<int64_t>()[0]);
  std::sort(values.begin(), values.end());
  std::vector<int64_t> expected(1000);
  for (int64_t i = 0; i < 1000; ++i) expected[i] = i;
  CHECK(values == expected);
  absl::StatusOr<std::vector<Element>> parallel =
      Dataset::Range(100).ReadFromService({.service = cluster.ServiceUrl()}).Collect();
  INFO(parallel.status().ToString());
  REQUIRE(parallel.ok());
  // Each worker's whole epoch: 0..99 once per worker.
  std::vector<int64_t> parallel_values = testing::Int64Values(*parallel);
  std::sort(parallel_values.begin(), parallel_values.end());
  std::vector<int64_t> parallel_expected;
  for (int64_t i = 0; i < 100; ++i)
    parallel_expected.insert(parallel_expected.end(), cluster.num_workers(), i);
  CHECK(parallel_values == parallel_expected);
}

TEST_CASE("fuzz: under the client token, random requests to every RPC leave an honest read beside them exact",
          "[service][hardening][fuzz][tenants]") {
  INFO("seed " << kSeed);
  testing::TempDir dir;
  const std::vector<std::string> tokens = testing::TokenFlags(dir);
  testing::ScopedClientSecurity honest({.token = testing::kClientToken});
  // Both daemons under an address-space limit (issue 50): an allocation a
  // request provokes past it would abort them.
  const std::vector<std::string> limited = {"/usr/bin/prlimit", "--as=3221225472", "--"};
  TestCluster cluster({.num_workers = 2,
                       .dispatcher_args = tokens,
                       .worker_args = tokens,
                       .dispatcher_launcher = limited,
                       .worker_launcher = limited});
  std::set<std::string> real;
  for (int i = 0; i < cluster.num_workers(); ++i)
    real.insert(absl::StrCat("127.0.0.1:", cluster.WorkerPort(i)));
  Fuzzer fuzzer(real);
  const ChannelSecurity as_client{.token = testing::kClientToken};
  auto dispatcher =
      proto::DispatcherService::NewStub(MakeSecureChannel(cluster.DispatcherAddress(), as_client));
  auto worker = proto::WorkerService::NewStub(
      MakeSecureChannel(absl::StrCat("127.0.0.1:", cluster.WorkerPort(0)), as_client));
  // The honest reader: every element exactly once, whatever the fuzzer does.
  constexpr int64_t kElements = 20000;
  std::vector<int64_t> values;
  absl::Status read_status;
  std::thread reader([&] {
    read_status = testing::ReadToEnd(
        Dataset::Range(kElements).ReadFromService({.service = cluster.ServiceUrl(),
                                                   .processing_mode = ProcessingMode::kDistributedEpoch,
                                                   .job_name = "honest",
                                                   .exactly_once = true}),
        &values, /*pause_every=*/200);
  });
  int dispatcher_accepted = 0;
  int worker_accepted = 0;
  std::vector<std::string> failures =
      Barrage(fuzzer, DispatcherRpcs(*dispatcher, fuzzer), kDispatcherRequests / 2, &dispatcher_accepted);
  const std::vector<std::string> worker_failures =
      Barrage(fuzzer, WorkerRpcs(*worker, fuzzer), kWorkerRequests / 2, &worker_accepted);
  failures.insert(failures.end(), worker_failures.begin(), worker_failures.end());
  reader.join();
  std::string report;
  for (const std::string& failure : failures) absl::StrAppend(&report, failure, "\n");
  INFO(report);
  CHECK(failures.empty());
  CAPTURE(dispatcher_accepted, worker_accepted);
  CHECK(dispatcher_accepted > 100);
  INFO(read_status.ToString());
  REQUIRE(read_status.ok());
  std::sort(values.begin(), values.end());
  std::vector<int64_t> expected(kElements);
  for (int64_t i = 0; i < kElements; ++i) expected[i] = i;
  CHECK(values == expected);
  // Both workers still serve, and no daemon exited.
  CHECK(cluster.RegisteredWorkers() == 2);
  CHECK(cluster.dispatcher().Wait(std::chrono::milliseconds(0)) == -1);
  for (int i = 0; i < cluster.num_workers(); ++i)
    CHECK(cluster.worker(i).Wait(std::chrono::milliseconds(0)) == -1);
}

}  // namespace
}  // namespace sluice
