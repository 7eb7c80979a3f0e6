// An anonymous job's exactly_once read shared by several clients (each a
// sole reader, joined by job id) fails when one of its tasks is lost unread
// (before any of its splits could run again); with one client it reads on,
// and no second client may join it afterwards. A named job's read recovers
// exactly instead (held_splits_test.cc); a deterministic one takes no
// second consumer.
#include "dispatcher/shared_exactly_once.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "client/dataset_internal.h"
#include "dispatcher/dispatcher_impl.h"
#include "tests/testing/dispatcher_test_util.h"

namespace sluice::dispatcher {
namespace {

TEST_CASE("shared_exactly_once: a task lost unread fails a read shared by two clients, naming why",
          "[dispatcher][exactly_once]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "a:1");
  Heartbeat(d, "b:2");
  const int64_t job = RangeJobOverSplits(d, /*exactly_once=*/true);
  const auto first = Iteration(d, job);
  const auto second = Iteration(d, job);
  REQUIRE(first.iteration_client_id() != second.iteration_client_id());
  const int64_t lost = TaskOn(d, first.iteration_id(), "a:1");
  REQUIRE(Splits(d, first.iteration_id(), lost, 4).splits_size() > 0);
  Shutdown(d, "a:1");
  for (int64_t client : {first.iteration_client_id(), second.iteration_client_id()}) {
    const proto::ClientHeartbeatResponse beat = ClientBeat(d, client);
    CHECK(beat.error_code() == static_cast<int>(absl::StatusCode::kAborted));
    CHECK(absl::StrContains(beat.error_message(),
                            "anonymous job " + std::to_string(job) + " (repetition 0, iteration "));
    CHECK(absl::StrContains(beat.error_message(), "is read exactly_once by several consumers, and its task " +
                                                      std::to_string(lost) +
                                                      " on worker a:1 was lost (worker shut down)"));
    CHECK(absl::StrContains(beat.error_message(), "num_consumers"));
  }
  // Failed before the loss: nothing of the lost task went back to be read
  // again.
  const int64_t other = TaskOn(d, first.iteration_id(), "b:2");
  proto::GetSplitsResponse after;
  proto::GetSplitsRequest request;
  request.set_iteration_id(first.iteration_id());
  request.set_task_id(other);
  request.set_max_splits(100);
  request.set_request_id(1);
  if (Call(d, &DispatcherImpl::GetSplits, request, &after).ok()) {
    CHECK(after.splits_size() == 0);
  }
}

TEST_CASE("shared_exactly_once: what does not break the promise reads on", "[dispatcher][exactly_once]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "a:1");
  Heartbeat(d, "b:2");
  SECTION("without exactly_once, a lost task's splits run again (at least once)") {
    const int64_t job = RangeJobOverSplits(d, /*exactly_once=*/false);
    const auto first = Iteration(d, job);
    Iteration(d, job);
    Splits(d, first.iteration_id(), TaskOn(d, first.iteration_id(), "a:1"), 4);
    Shutdown(d, "a:1");
    CHECK(ClientBeat(d, first.iteration_client_id()).error_code() == 0);
  }
  SECTION("a task read to its end is not lost") {
    const int64_t job = RangeJobOverSplits(d, /*exactly_once=*/true);
    const auto first = Iteration(d, job);
    Iteration(d, job);
    const int64_t task = TaskOn(d, first.iteration_id(), "a:1");
    ClientReport(d, first.iteration_client_id(), {task});
    Shutdown(d, "a:1");
    CHECK(ClientBeat(d, first.iteration_client_id()).error_code() == 0);
  }
  SECTION("one client reads the rerun alone; a second may not join it then") {
    const int64_t job = RangeJobOverSplits(d, /*exactly_once=*/true);
    const auto first = Iteration(d, job);
    const int64_t lost = TaskOn(d, first.iteration_id(), "a:1");
    Splits(d, first.iteration_id(), lost, 4);
    Shutdown(d, "a:1");
    CHECK(ClientBeat(d, first.iteration_client_id()).error_code() == 0);
    proto::GetOrCreateIterationRequest request;
    request.set_job_id(job);
    proto::GetOrCreateIterationResponse response;
    const absl::Status join = Call(d, &DispatcherImpl::GetOrCreateIteration, request, &response);
    REQUIRE(absl::IsFailedPrecondition(join));
    CHECK(absl::StartsWith(join.message(), "anonymous job " + std::to_string(job) +
                                               " repetition 0 lost task " + std::to_string(lost) +
                                               " on worker a:1 (worker shut down) while one consumer read it "
                                               "exactly_once"));
  }
}

TEST_CASE("shared_exactly_once: a client released and taken back is still one client",
          "[dispatcher][exactly_once]") {
  proto::JobParams params;
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  DispatcherState state = StateWithIteration(params);
  auto apply = [&state](const proto::Update& update) { ApplyOk(state, update); };
  auto acquire = [&](int64_t client) {
    proto::Update update;
    update.mutable_acquire_iteration_client()->set_iteration_client_id(client);
    update.mutable_acquire_iteration_client()->set_iteration_id(1);
    apply(update);
  };
  proto::Update release;
  release.mutable_release_iteration_client()->set_iteration_client_id(5);
  acquire(5);
  apply(release);
  acquire(5);
  CHECK_FALSE(state.FindIteration(1)->several_clients);
  // Snapshots keep it.
  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(state.ToSnapshot());
  REQUIRE(restored.ok());
  CHECK(restored->FindIteration(1)->first_client == 5);
  CHECK_FALSE(restored->FindIteration(1)->several_clients);
  apply(release);
  acquire(6);
  CHECK(state.FindIteration(1)->several_clients);
  restored = DispatcherState::FromSnapshot(state.ToSnapshot());
  REQUIRE(restored.ok());
  CHECK(restored->FindIteration(1)->several_clients);
}

}  // namespace
}  // namespace sluice::dispatcher
