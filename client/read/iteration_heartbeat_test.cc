// The reader's side of a shared exactly_once read's hold (issue 50,
// finding 10), against a scripted dispatcher: the answer waits while a
// request is in flight to the unlisted task, carries what this reader took
// of the held splits, is sent once, and positions below the lowest split
// still out are forgotten.
#include "client/read/iteration_heartbeat.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/testing/loopback_server.h"

namespace sluice::reader {
namespace {

// Answers each ClientHeartbeat as `script` says, and keeps the requests.
class ScriptedDispatcher final : public proto::DispatcherService::Service {
 public:
  using Script = std::function<void(const proto::ClientHeartbeatRequest&, proto::ClientHeartbeatResponse*)>;
  explicit ScriptedDispatcher(Script script) : script_(std::move(script)) {}

  grpc::Status ClientHeartbeat(grpc::ServerContext*, const proto::ClientHeartbeatRequest* request,
                               proto::ClientHeartbeatResponse* response) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back(*request);
    script_(*request, response);
    return grpc::Status::OK;
  }

  // The requests so far, once there are at least `count` (within 10 s).
  std::vector<proto::ClientHeartbeatRequest> AtLeast(size_t count) {
    absl::MutexLock lock(&mu_);
    const auto enough = [this, count]()
                            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return requests_.size() >= count; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return requests_;
  }

 private:
  absl::Mutex mu_;
  const Script script_ ABSL_GUARDED_BY(mu_);
  std::vector<proto::ClientHeartbeatRequest> requests_ ABSL_GUARDED_BY(mu_);
};

std::vector<int64_t> Pairs(const proto::SplitDelivery& split) {
  return std::vector<int64_t>(split.delivered().begin(), split.delivered().end());
}

TEST_CASE("iteration heartbeat: a hold is answered once the lost task has nothing in flight, and only once",
          "[client][exactly_once]") {
  int64_t hold = 1;
  ScriptedDispatcher dispatcher(
      [&hold](const proto::ClientHeartbeatRequest& request, proto::ClientHeartbeatResponse* response) {
        // The task list no longer has task 7: its worker was lost.
        response->set_task_list(5);
        if (request.answered_hold() == hold) {
          hold = 0;  // answered: the splits go back and run again
          response->set_lowest_outstanding_split(2);
        }
        if (hold != 0) {
          response->set_report_hold(hold);
          response->add_report_splits(1);  // the held splits: [1, 4)
          response->add_report_splits(4);
        }
      });
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::ServeOnLoopback(&dispatcher, &port);
  DispatcherClient client("127.0.0.1:" + std::to_string(port));

  ReadState state(0, /*sole_reader_in=*/false, std::nullopt, {}, /*exactly_once=*/true);
  int64_t in_flight = 0;
  {
    absl::MutexLock lock(&state.mu);
    // What this reader took: positions 0, 1 and 3 of split 1, 0 of split 3
    // and 5 of split 9 (not held).
    for (const auto& [seq, position] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {1, 1}, {1, 3}, {3, 0}, {9, 5}}) {
      REQUIRE(state.positions.Accept(seq, position));
    }
    TaskState& lost = state.tasks[7];
    lost.worker_address = "127.0.0.1:1";
    in_flight = lost.order.Send();  // a request to the lost task, not back yet
  }
  IterationHeartbeat heartbeat(state, client, /*iteration_client_id=*/3, "secret", absl::Seconds(60),
                               /*fetches=*/nullptr);
  std::thread loop([&heartbeat] { heartbeat.HeartbeatLoop(); });

  // Asked, it waits: a response of the lost task may still come in.
  std::vector<proto::ClientHeartbeatRequest> requests = dispatcher.AtLeast(4);
  for (const proto::ClientHeartbeatRequest& request : requests) {
    CHECK(request.iteration_client_id() == 3);
    CHECK(request.client_secret() == "secret");
    CHECK(request.answered_hold() == 0);
    CHECK(request.taken_positions().empty());
  }
  {
    absl::MutexLock lock(&state.mu);
    CHECK(state.report_hold == 1);
    CHECK(state.tasks[7].removed);
    state.tasks[7].order.Returned(in_flight);
  }

  // Then the next heartbeat answers, with what it took of the held splits.
  const size_t before = requests.size();
  requests = dispatcher.AtLeast(before + 4);
  std::vector<proto::ClientHeartbeatRequest> answers;
  for (size_t i = before; i < requests.size(); ++i) {
    if (requests[i].answered_hold() != 0) answers.push_back(requests[i]);
  }
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].answered_hold() == 1);
  CHECK_FALSE(answers[0].taken_positions_cut());
  REQUIRE(answers[0].taken_positions_size() == 2);
  CHECK(answers[0].taken_positions(0).seq() == 1);
  CHECK(Pairs(answers[0].taken_positions(0)) == std::vector<int64_t>{0, 2, 3, 4});
  CHECK(answers[0].taken_positions(1).seq() == 3);
  CHECK(Pairs(answers[0].taken_positions(1)) == std::vector<int64_t>{0, 1});
  {
    absl::MutexLock lock(&state.mu);
    state.cancelled = true;
    CHECK(state.report_hold == 0);
    // Below split 2 nothing runs again: split 1's positions are forgotten.
    bool cut = false;
    const auto kept = state.positions.Taken({{0, 100}}, 1000, &cut);
    REQUIRE(kept.size() == 2);
    CHECK(kept[0].first == 3);
    CHECK(kept[1].first == 9);
  }
  loop.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace sluice::reader
