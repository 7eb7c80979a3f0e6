// Issue 50's bounds, each attack against real daemons with two tenants
// (alice attacks, bob reads honestly and must get every element exactly
// once): quotas that default to a fair share and show a tenant only its
// own usage (finding 6), a heartbeat of millions of completed splits
// refused before the lock (5), and restored reads' skip lists counted
// toward the tenant's quota (4).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "grpcpp/generic/generic_stub.h"
#include "service/channel_security.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/security_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using testing::ScopedClientSecurity;
using testing::TestCluster;

const ChannelSecurity kAlice{.token = "token-of-alice-0123456789"};
const ChannelSecurity kBob{.token = "token-of-bob-0123456789"};
const char kQuotaTail[] =
    " (finished jobs and the datasets they used are forgotten after job_retention_ms; an operator may raise "
    "the quota)";

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = i;
  return values;
}

// A cluster of tenants alice and bob, started under the cluster token.
TestCluster StartTenants(const testing::TempDir& dir, std::vector<std::string> dispatcher_flags,
                         std::vector<std::string> launcher = {}) {
  const std::vector<std::string> flags = testing::TenantFlags(dir, {"alice", "bob"});
  dispatcher_flags.insert(dispatcher_flags.begin(), flags.begin(), flags.end());
  ScopedClientSecurity as_cluster({.token = testing::kClusterToken});
  return TestCluster({.num_workers = 1,
                      .dispatcher_args = dispatcher_flags,
                      .worker_args = flags,
                      .dispatcher_launcher = launcher,
                      .worker_launcher = launcher});
}

// Bob's exactly_once read of range(3000) through the cluster: every
// element once.
void BobReadsExactly(const TestCluster& cluster) {
  ScopedClientSecurity as_bob(kBob);
  std::vector<int64_t> values;
  REQUIRE(testing::ReadToEnd(
              Dataset::Range(3000).ReadFromService({.service = cluster.ServiceUrl(),
                                                    .processing_mode = ProcessingMode::kDistributedEpoch,
                                                    .exactly_once = true}),
              &values)
              .ok());
  std::sort(values.begin(), values.end());
  CHECK(values == Iota(3000));
}

class Tenant {
 public:
  Tenant(const TestCluster& cluster, const ChannelSecurity& security)
      : stub_(proto::DispatcherService::NewStub(MakeSecureChannel(cluster.DispatcherAddress(), security))) {}

  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (proto::DispatcherService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                                        Response*),
                    Request request, Response* response) {
    *request.mutable_version() = CurrentVersion();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return (stub_.get()->*rpc)(&context, request, response);
  }

  grpc::Status Register(const Dataset& dataset, std::string* id) {
    proto::GetOrRegisterDatasetRequest request;
    *request.mutable_dataset() = internal::DefinitionOf(dataset);
    proto::GetOrRegisterDatasetResponse response;
    const grpc::Status status =
        Call(&proto::DispatcherService::Stub::GetOrRegisterDataset, request, &response);
    if (id != nullptr) *id = response.dataset_id();
    return status;
  }

  // A read of a new anonymous job over `dataset_id`, as one that a state
  // is saved from: its job id and the dispatcher's answer (restore_key).
  std::pair<int64_t, proto::GetOrCreateIterationResponse> StartRead(const std::string& dataset_id) {
    proto::GetOrCreateIterationRequest start;
    start.set_job_id(AnonymousJob(dataset_id));
    proto::GetOrCreateIterationResponse started;
    REQUIRE(Call(&proto::DispatcherService::Stub::GetOrCreateIteration, start, &started).ok());
    REQUIRE(started.restore_key().size() == 32);
    return {start.job_id(), started};
  }

  // A new anonymous distributed_epoch exactly_once job over `dataset_id`.
  int64_t AnonymousJob(const std::string& dataset_id) {
    proto::GetOrCreateJobRequest request;
    request.mutable_params()->set_dataset_id(dataset_id);
    request.mutable_params()->set_processing_mode(proto::DISTRIBUTED_EPOCH);
    request.mutable_params()->set_exactly_once(true);
    proto::GetOrCreateJobResponse response;
    REQUIRE(Call(&proto::DispatcherService::Stub::GetOrCreateJob, request, &response).ok());
    return response.job_id();
  }

 private:
  std::unique_ptr<proto::DispatcherService::Stub> stub_;
};

TEST_CASE(
    "tenants round two: quotas default to a fair share, a refusal shows the tenant its own usage, and a "
    "heartbeat past its bound is refused whole",
    "[service][security][tenants]") {
  testing::TempDir dir;
  TestCluster cluster = StartTenants(dir, {"--max-datasets", "4"});
  Tenant alice(cluster, kAlice);
  // Alice's share of 4 is 2: her third dataset is refused, naming her
  // own usage and quota, not the dispatcher's.
  REQUIRE(alice.Register(Dataset::Range(1), nullptr).ok());
  REQUIRE(alice.Register(Dataset::Range(2), nullptr).ok());
  const grpc::Status third = alice.Register(Dataset::Range(3), nullptr);
  CHECK(third.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(third.error_message() ==
        absl::StrCat("GetOrRegisterDataset: tenant 'alice' holds 2 datasets, past its quota "
                     "tenant_max_datasets = 2",
                     kQuotaTail));

  // A heartbeat naming 70,000 completed splits: refused before anything
  // is looked up (the id and secret are not even checked).
  proto::ClientHeartbeatRequest forged;
  forged.set_iteration_client_id(1);
  for (int64_t seq = 1; seq <= 70000; ++seq) forged.add_completed_splits(seq);
  proto::ClientHeartbeatResponse heard;
  const grpc::Status refused = alice.Call(&proto::DispatcherService::Stub::ClientHeartbeat, forged, &heard);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(refused.error_message() ==
        "ClientHeartbeat: completed_splits must be at most 65536 entries, got 70000");

  // Bob still has his share, and reads exactly.
  BobReadsExactly(cluster);
}

TEST_CASE(
    "tenants round two: restored reads' skip lists count toward the tenant's quota, and an honest restore "
    "still works",
    "[service][security][tenants]") {
  testing::TempDir dir;
  TestCluster cluster = StartTenants(dir, {"--max-restore-numbers", "1000", "--elements-per-split", "10"});
  Tenant alice(cluster, kAlice);
  std::string dataset_id;
  REQUIRE(alice.Register(Dataset::Range(100000), &dataset_id).ok());
  // Her own restore keys, from reads she started: each is bound to its job
  // (restore_job_id) and repetition.
  const auto [first_job, first] = alice.StartRead(dataset_id);
  const auto [second_job, second] = alice.StartRead(dataset_id);
  auto restore = [&](const proto::GetOrCreateIterationResponse& saved, int64_t saved_job, int ranges,
                     proto::GetOrCreateIterationResponse* response) {
    proto::GetOrCreateIterationRequest request;
    request.set_job_id(alice.AnonymousJob(dataset_id));
    for (int i = 0; i < ranges; ++i) {
      request.add_skip_splits(1 + 3 * i);
      request.add_skip_splits(2 + 3 * i);
    }
    request.set_split_layout(saved.split_layout());
    request.set_restore_key(saved.restore_key());
    request.set_restore_job_id(saved_job);
    return std::pair(request.job_id(),
                     alice.Call(&proto::DispatcherService::Stub::GetOrCreateIteration, request, response));
  };
  proto::GetOrCreateIterationResponse response;
  // A key without the job it names, or with another job, restores nothing.
  const auto [unnamed_job, unnamed] = restore(first, 0, 1, &response);
  CHECK(unnamed.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(unnamed.error_message() ==
        absl::StrCat(
            "GetOrCreateIteration: a restored read of an anonymous job into job ", unnamed_job,
            " names no restore_job_id, which its restore_key is bound to (a state saved by a Sluice "
            "release before restore keys were bound to anonymous jobs cannot be restored where auth is "
            "on)"));
  const auto [misnamed_job, misnamed] = restore(first, second_job, 1, &response);
  CHECK(misnamed.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(misnamed.error_message() ==
        absl::StrCat(
            "GetOrCreateIteration: skip_splits or skip_positions (a restored read) for job ", misnamed_job,
            " need the restore_key of a state saved from repetition 0 of this job on this cluster, and "
            "this one is not (a state saved by a Sluice release before restore keys, or on another "
            "cluster, cannot be restored where auth is on)"));
  // Her share of 1000 numbers is 500: one restore of 400, not two.
  proto::GetOrCreateIterationResponse restored_once;
  const grpc::Status accepted = restore(first, first_job, 200, &restored_once).second;
  INFO(accepted.error_message());
  REQUIRE(accepted.ok());
  const grpc::Status refused = restore(second, second_job, 200, &response).second;
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(
      refused.error_message() ==
      absl::StrCat("GetOrCreateIteration: tenant 'alice' holds 400 numbers of restored reads' skip lists and "
                   "this adds 400, past its quota tenant_max_restore_numbers = 500",
                   kQuotaTail));
  // The same saved read restored again (a trainer that crashed after its
  // restore) supersedes the running restore, whose numbers go with it:
  // one key never holds two restored repetitions.
  proto::GetOrCreateIterationResponse again;
  REQUIRE(restore(first, first_job, 200, &again).second.ok());
  proto::ClientHeartbeatRequest beat;
  beat.set_iteration_client_id(restored_once.iteration_client_id());
  beat.set_client_secret(restored_once.client_secret());
  proto::ClientHeartbeatResponse heard;
  REQUIRE(alice.Call(&proto::DispatcherService::Stub::ClientHeartbeat, beat, &heard).ok());
  CHECK(heard.error_code() == static_cast<int>(absl::StatusCode::kAborted));
  CHECK(heard.error_message() ==
        absl::StrCat("a newer restore of the same saved read (anonymous job ", first_job,
                     ", repetition 0) started, and one saved state restores into one running read at a time; "
                     "this read was superseded"));
  CHECK(heard.iteration_finished());
  // The new restore holds the 400 the superseded one did: the other saved
  // read's is still refused.
  CHECK(restore(second, second_job, 200, &response).second.error_code() ==
        grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Bob saves midway through an epoch and restores it, exactly.
  ScopedClientSecurity as_bob(kBob);
  const Dataset read =
      Dataset::Range(4000).ReadFromService({.service = cluster.ServiceUrl(),
                                            .processing_mode = ProcessingMode::kDistributedEpoch,
                                            .job_name = "bob",
                                            .exactly_once = true});
  std::vector<int64_t> values;
  std::string state;
  {
    Iterator iterator = testing::MakeOrFail(read);
    testing::Take(iterator, 1500, &values);
    state = testing::SaveOrFail(iterator);
  }
  Iterator restored = testing::RestoreOrFail(read, state);
  testing::Take(restored, -1, &values);
  std::sort(values.begin(), values.end());
  CHECK(values == Iota(4000));
}

TEST_CASE(
    "tenants round two: under a 3 GiB address-space limit the dispatcher outlives the restore and heartbeat "
    "attacks, and an honest tenant reads exactly",
    "[service][security][tenants]") {
  // Finding 4 aborted a dispatcher under this limit after 4-5 restores of
  // 2^21 skipped splits each; finding 5's heartbeats held gigabytes.
  testing::TempDir dir;
  TestCluster cluster =
      StartTenants(dir, {"--elements-per-split", "10"}, {"/usr/bin/prlimit", "--as=3221225472", "--"});
  Tenant alice(cluster, kAlice);
  std::string dataset_id;
  REQUIRE(alice.Register(Dataset::Range(int64_t{100000000}), &dataset_id).ok());
  const auto [started_job, started] = alice.StartRead(dataset_id);
  proto::GetOrCreateIterationRequest restore;
  for (int i = 0; i < (1 << 20); ++i) {  // 2^21 numbers: the most one request may carry
    restore.add_skip_splits(1 + 3 * i);
    restore.add_skip_splits(2 + 3 * i);
  }
  restore.set_split_layout(started.split_layout());
  // One saved read restored 10 times: each restore supersedes the last,
  // so they hold one skip list in all.
  restore.set_restore_key(started.restore_key());
  restore.set_restore_job_id(started_job);
  for (int attempt = 0; attempt < 10; ++attempt) {
    restore.set_job_id(alice.AnonymousJob(dataset_id));
    proto::GetOrCreateIterationResponse response;
    const grpc::Status status =
        alice.Call(&proto::DispatcherService::Stub::GetOrCreateIteration, restore, &response);
    INFO(status.error_message());
    CHECK(status.ok());
  }
  // Ten saved reads restored once each: the quota stops them.
  int accepted = 0;
  std::vector<grpc::Status> refused;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const auto [saved_job, saved] = alice.StartRead(dataset_id);
    restore.set_restore_key(saved.restore_key());
    restore.set_restore_job_id(saved_job);
    restore.set_job_id(alice.AnonymousJob(dataset_id));
    proto::GetOrCreateIterationResponse response;
    const grpc::Status status =
        alice.Call(&proto::DispatcherService::Stub::GetOrCreateIteration, restore, &response);
    if (status.ok()) {
      ++accepted;
    } else {
      refused.push_back(status);
    }
  }
  // Her share of the default 2^23 numbers is 2^22: the restore above and
  // one more of 2^21.
  CHECK(accepted == 1);
  REQUIRE(refused.size() == 9);
  for (const grpc::Status& status : refused) {
    CHECK(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK(status.error_message() ==
          absl::StrCat("GetOrCreateIteration: tenant 'alice' holds 4194304 numbers of restored reads' skip "
                       "lists and this adds 2097152, past its quota tenant_max_restore_numbers = 4194304",
                       kQuotaTail));
  }
  // Four heartbeats of 2^21 completed splits at once: refused before the lock.
  std::vector<std::thread> senders;
  std::vector<grpc::Status> heard(4);
  for (int i = 0; i < 4; ++i) {
    senders.emplace_back([&, i] {
      Tenant sender(cluster, kAlice);
      proto::ClientHeartbeatRequest forged;
      forged.set_iteration_client_id(started.iteration_client_id());
      for (int64_t seq = 0; seq < (int64_t{1} << 21); ++seq) forged.add_completed_splits(seq);
      proto::ClientHeartbeatResponse response;
      heard[i] = sender.Call(&proto::DispatcherService::Stub::ClientHeartbeat, forged, &response);
    });
  }
  for (std::thread& sender : senders) sender.join();
  for (const grpc::Status& status : heard) {
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message() ==
          "ClientHeartbeat: completed_splits must be at most 65536 entries, got 2097152");
  }
  // The dispatcher lives, and bob reads every element exactly once.
  CHECK(cluster.dispatcher().Wait(std::chrono::milliseconds(0)) == -1);
  BobReadsExactly(cluster);
  CHECK(cluster.dispatcher().Wait(std::chrono::milliseconds(0)) == -1);
}

// A process's resident memory now, and at its peak, from /proc.
int64_t ResidentBytes(pid_t pid) { return testing::ProcStatus(pid, "VmRSS") * 1024; }
int64_t PeakResidentBytes(pid_t pid) { return testing::ProcStatus(pid, "VmHWM") * 1024; }

TEST_CASE(
    "tenants round two: a cross-trainer cache of zero-byte elements stays within max_bytes on a worker under "
    "a 3 GiB address-space limit",
    "[service][security][tenants]") {
  // Finding 3: weighed by tensor bytes, "" elements were never evicted, and
  // each worker grew by about 2 GB a minute until it aborted.
  testing::TempDir dir;
  TestCluster cluster = StartTenants(dir, {}, {"/usr/bin/prlimit", "--as=3221225472", "--"});
  const pid_t worker = cluster.worker(0).pid();
  {
    ScopedClientSecurity as_alice(kAlice);
    ServiceOptions options{.service = cluster.ServiceUrl(), .job_name = "zeros"};
    options.cross_trainer_cache = ServiceOptions::CrossTrainerCache{.trainer_id = "t1", .max_bytes = 1};
    Iterator zeros = testing::MakeOrFail(
        Dataset::FromTensors({Tensor::StringScalar("")}).Repeat().ReadFromService(options));
    for (int i = 0; i < 20000; ++i) REQUIRE(zeros.GetNext().ok());  // warm up
    const int64_t before = ResidentBytes(worker);
    for (int i = 0; i < 1000000; ++i) REQUIRE(zeros.GetNext().ok());
    const int64_t grown = ResidentBytes(worker) - before;
    INFO("the worker grew by " << grown << " bytes over 1,000,000 elements");
    // Kept, they would weigh about 130 MB; the cache holds none of them.
    CHECK(grown < (int64_t{48} << 20));
  }
  CHECK(cluster.worker(0).Wait(std::chrono::milliseconds(0)) == -1);
  BobReadsExactly(cluster);
  CHECK(cluster.worker(0).Wait(std::chrono::milliseconds(0)) == -1);
}

TEST_CASE(
    "tenants round two: unauthenticated 200 MiB requests are refused before their bodies are read, "
    "under a 3 GiB address-space limit",
    "[service][security][tenants]") {
  // Finding 8: gRPC reads a request's whole body before any handler (and so
  // any token check) runs; 30 such requests grew a worker to 3.1 GB
  // (2.7 GB kept) before each daemon's server had a memory quota, and to
  // the quota's 512 MiB after. The gate at the transport
  // (service/call_gate.h) refuses them on their headers.
  testing::TempDir dir;
  TestCluster cluster = StartTenants(dir, {}, {"/usr/bin/prlimit", "--as=3221225472", "--"});
  const std::string body(size_t{200} << 20, '\0');
  const grpc::Slice slice(body.data(), body.size());
  const auto attack = [&](const std::string& address, const std::string& method, const std::string& refusal) {
    std::vector<std::thread> callers;
    std::vector<grpc::Status> statuses(16);
    for (size_t i = 0; i < statuses.size(); ++i) {
      callers.emplace_back([&, i] {
        // No token: a stranger on the network.
        grpc::ChannelArguments args;
        args.SetMaxSendMessageSize(300 << 20);
        args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
        grpc::GenericStub stub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
        grpc::ByteBuffer request(&slice, 1);
        grpc::ByteBuffer response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        std::promise<grpc::Status> done;
        stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                       [&done](grpc::Status status) { done.set_value(std::move(status)); });
        statuses[i] = done.get_future().get();
      });
    }
    for (std::thread& caller : callers) caller.join();
    for (const grpc::Status& status : statuses) {
      CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
      CHECK(status.error_message() == refusal);
    }
  };
  attack(absl::StrCat("127.0.0.1:", cluster.WorkerPort(0)), "/sluice.proto.WorkerService/GetElements",
         "GetElements needs the client token and the call carried none (set SLUICE_TOKEN_FILE, or "
         "--token-file)");
  attack(cluster.DispatcherAddress(), "/sluice.proto.DispatcherService/GetVersion",
         "GetVersion needs the client token and the call carried none (set SLUICE_TOKEN_FILE, or "
         "--token-file)");
  REQUIRE(cluster.worker(0).Wait(std::chrono::milliseconds(0)) == -1);
  REQUIRE(cluster.dispatcher().Wait(std::chrono::milliseconds(0)) == -1);
  // 16 bodies of 200 MiB at once are 3.2 GiB; each daemon's peak stays
  // below one of them (a daemon at rest holds tens of MB).
  const int64_t worker_peak = PeakResidentBytes(cluster.worker(0).pid());
  const int64_t dispatcher_peak = PeakResidentBytes(cluster.dispatcher().pid());
  INFO("peak resident: worker " << worker_peak << ", dispatcher " << dispatcher_peak << " bytes");
  CHECK(worker_peak > 0);
  CHECK(worker_peak < (int64_t{160} << 20));
  CHECK(dispatcher_peak > 0);
  CHECK(dispatcher_peak < (int64_t{160} << 20));
  // The refusals are logged, without the caller's address, which gRPC does
  // not give the gate.
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dir().File("worker0.log")),
             Catch::Matchers::Contains("refused a call from a peer gRPC does not name at the transport: "
                                       "GetElements needs the client token"));
  // And bob reads every element exactly once.
  BobReadsExactly(cluster);
}

}  // namespace
}  // namespace sluice
