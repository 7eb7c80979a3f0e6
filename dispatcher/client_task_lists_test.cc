// A client heartbeat's task lists are left out while they are unchanged
// (ClientHeartbeatRequest.known_task_list), and come back whole as soon as
// anything in them may have changed.
#include <catch2/catch.hpp>

#include "dispatcher/dispatcher_impl.h"
#include "tests/testing/dispatcher_test_util.h"

namespace sluice::dispatcher {
namespace {

proto::ClientHeartbeatResponse BeatKnowing(DispatcherImpl& d, int64_t client_id, int64_t known_task_list) {
  proto::ClientHeartbeatRequest request;
  request.set_iteration_client_id(client_id);
  request.set_client_secret(d.ClientSecretOf(client_id));
  request.set_known_task_list(known_task_list);
  return CallOk(d, &DispatcherImpl::ClientHeartbeat, request);
}

}  // namespace

TEST_CASE("client task lists: unchanged lists are left out, a lost worker sends them again", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  REQUIRE(d.Start().ok());
  const std::string dataset = Register(d, SquaresDef());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:1");
  const int64_t job = Job(d, dataset);
  const int64_t client = Iteration(d, job).iteration_client_id();

  const proto::ClientHeartbeatResponse first = BeatKnowing(d, client, 0);
  CHECK(first.tasks_size() == 2);
  CHECK_FALSE(first.task_list_unchanged());
  REQUIRE(first.task_list() != 0);

  const proto::ClientHeartbeatResponse same = BeatKnowing(d, client, first.task_list());
  CHECK(same.task_list_unchanged());
  CHECK(same.task_list() == first.task_list());
  CHECK(same.tasks_size() == 0);
  CHECK(same.lost_tasks_size() == 0);
  CHECK_FALSE(same.iteration_finished());

  // A number the client made up, or one from before a restart, is not current.
  const proto::ClientHeartbeatResponse stale = BeatKnowing(d, client, first.task_list() + 1);
  CHECK_FALSE(stale.task_list_unchanged());
  CHECK(stale.tasks_size() == 2);

  Shutdown(d, "w2:1");
  const proto::ClientHeartbeatResponse after = BeatKnowing(d, client, first.task_list());
  CHECK_FALSE(after.task_list_unchanged());
  CHECK(after.task_list() != first.task_list());
  REQUIRE(after.tasks_size() == 1);
  CHECK(after.tasks(0).worker_address() == "w1:1");
  REQUIRE(after.lost_tasks_size() == 1);
  CHECK(after.lost_tasks(0).worker_address() == "w2:1");

  // Leases and their delivery change no list.
  const proto::ClientHeartbeatResponse settled = BeatKnowing(d, client, after.task_list());
  CHECK(settled.task_list_unchanged());
}

TEST_CASE("client task lists: another dispatcher process never takes a number for current", "[dispatcher]") {
  DispatcherImpl first(TestConfig());
  DispatcherImpl second(TestConfig());
  REQUIRE(first.Start().ok());
  REQUIRE(second.Start().ok());
  for (DispatcherImpl* d : {&first, &second}) {
    const std::string dataset = Register(*d, SquaresDef());
    Heartbeat(*d, "w1:1");
    Iteration(*d, Job(*d, dataset));
  }
  const int64_t known = BeatKnowing(first, 1, 0).task_list();
  // Same ids, same state, another process: its numbers start elsewhere.
  const proto::ClientHeartbeatResponse answer = BeatKnowing(second, 1, known);
  CHECK_FALSE(answer.task_list_unchanged());
  CHECK(answer.tasks_size() == 1);
}

}  // namespace sluice::dispatcher
