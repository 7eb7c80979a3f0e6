// service/dispatcher_client against a real dispatcher in this process: the
// version on every call, the adapter, and retries. It lives here because
// service/ may not include dispatcher/.
#include "service/dispatcher_client.h"

#include <catch2/catch.hpp>
#include <chrono>

#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/grpc_dispatcher_impl.h"
#include "service/daemon.h"
#include "service/grpc_util.h"

namespace sluice {
namespace {

using Catch::Matchers::StartsWith;

TEST_CASE("dispatcher_client: every call carries the protocol version and answers through the adapter",
          "[service][grpc]") {
  dispatcher::DispatcherImpl impl(dispatcher::DispatcherConfig{});
  REQUIRE(impl.Start().ok());
  const RpcAuthenticator no_tokens("", "");
  dispatcher::GrpcDispatcherImpl adapter(&impl, &no_tokens);
  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = StartServer({"127.0.0.1", 0, ""}, {&adapter}, &port);
  REQUIRE(server.ok());
  DispatcherClient client("127.0.0.1:" + std::to_string(port));
  proto::GetVersionResponse version;
  REQUIRE(client.GetVersion({}, &version).ok());
  CHECK(version.protocol_version() == kProtocolVersion);
  // The dispatcher refuses a request without the version (protocol
  // version 0), so an answer shows the client set it.
  proto::WorkerHeartbeatRequest beat;
  beat.set_worker_address("127.0.0.1:7");
  proto::WorkerHeartbeatResponse registered;
  REQUIRE(client.WorkerHeartbeat(beat, &registered).ok());
  proto::GetWorkersResponse workers;
  REQUIRE(client.GetWorkers({}, &workers).ok());
  REQUIRE(workers.workers_size() == 1);
  CHECK(workers.workers(0).address() == "127.0.0.1:7");
  // Errors come back as they are, at once, not retried.
  proto::GetDatasetInfoRequest unknown;
  unknown.set_dataset_id("nope");
  proto::GetDatasetInfoResponse info;
  const absl::Status status = client.GetDatasetInfo(unknown, &info, {.retry_for = std::chrono::seconds(30)});
  CHECK(absl::IsNotFound(status));
  CHECK(status.message() == "unknown dataset id 'nope'");
  (*server)->Shutdown();
}

TEST_CASE("dispatcher_client: retries end within retry_for, naming the call and the reason",
          "[service][grpc]") {
  DispatcherClient client("127.0.0.1:1");
  proto::GetWorkersResponse workers;
  // One attempt by default.
  CHECK(absl::IsUnavailable(client.GetWorkers({}, &workers)));
  const auto start = std::chrono::steady_clock::now();
  int heard = 0;
  const absl::Status status = client.GetWorkers({}, &workers,
                                                {.attempt_timeout = std::chrono::seconds(10),
                                                 .retry_for = std::chrono::milliseconds(1500),
                                                 .still_retrying = [&](const std::string&) { ++heard; }});
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(absl::IsUnavailable(status));
  CHECK_THAT(std::string(status.message()),
             StartsWith("GetWorkers at 127.0.0.1:1: no answer within 1500 ms: "));
  CHECK(heard == 1);
  CHECK(took < std::chrono::milliseconds(2500));
  // Cancelled between attempts.
  const absl::Status cancelled = client.GetWorkers(
      {}, &workers,
      {.retry_for = std::chrono::seconds(30), .what = "asking", .cancelled = [] { return true; }});
  CHECK(absl::IsCancelled(cancelled));
  CHECK(cancelled.message() == "asking: cancelled");
}

}  // namespace
}  // namespace sluice
