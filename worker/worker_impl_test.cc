// WorkerImpl against a dispatcher stand-in in this process: what the worker
// does with the TaskDefs and incarnations its heartbeats bring.
#include "worker/worker_impl.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/dataset_internal.h"
#include "common/element_cost.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/testing/loopback_server.h"
#include "tests/testing/test_util.h"

namespace sluice::worker {
namespace {

// Every wait of these tests is bounded by this.
constexpr absl::Duration kWaitAtMost = absl::Seconds(20);

// The name the worker gives itself; it serves no port in these tests.
constexpr char kWorkerAddress[] = "worker-under-test:1";

// A dispatcher on a free port of 127.0.0.1 that answers every worker
// heartbeat with the response the test set last, and counts them.
class FakeDispatcher : public proto::DispatcherService::Service {
 public:
  FakeDispatcher() {
    int port = 0;
    server_ = testing::ServeOnLoopback(this, &port);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  ~FakeDispatcher() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  const std::string& address() const { return address_; }

  // Heartbeats from now on get `response`; returns how many came before.
  int64_t Answer(const proto::WorkerHeartbeatResponse& response) {
    absl::MutexLock lock(&mu_);
    answer_ = response;
    return heartbeats_;
  }

  // Waits until the worker has acted on the answer set when `before`
  // heartbeats had come: it sends its next heartbeat only after handling
  // the previous response, so the second one after `before` proves it.
  // The task ids that heartbeat listed.
  std::vector<int64_t> AfterHandled(int64_t before) {
    absl::MutexLock lock(&mu_);
    auto handled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return heartbeats_ >= before + 2; };
    REQUIRE(mu_.AwaitWithTimeout(absl::Condition(&handled), kWaitAtMost));
    return last_current_tasks_;
  }

  grpc::Status WorkerHeartbeat(grpc::ServerContext*, const proto::WorkerHeartbeatRequest* request,
                               proto::WorkerHeartbeatResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++heartbeats_;
    last_current_tasks_.assign(request->current_tasks().begin(), request->current_tasks().end());
    *response = answer_;
    return grpc::Status::OK;
  }
  grpc::Status WorkerUpdates(grpc::ServerContext*, const proto::WorkerUpdatesRequest*,
                             proto::WorkerUpdatesResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status WorkerShutdown(grpc::ServerContext*, const proto::WorkerShutdownRequest*,
                              proto::WorkerShutdownResponse*) override {
    return grpc::Status::OK;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  absl::Mutex mu_;
  proto::WorkerHeartbeatResponse answer_ ABSL_GUARDED_BY(mu_);
  int64_t heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> last_current_tasks_ ABSL_GUARDED_BY(mu_);
};

WorkerConfig FastConfig(const std::string& dispatcher) {
  WorkerConfig config;
  config.dispatcher = dispatcher;
  config.heartbeat_interval_ms = 10;
  config.dispatcher_timeout_ms = 10000;
  config.shared_memory = false;
  return config;
}

// A parallel_epochs task of `dataset`, as a dispatcher of `incarnation`
// hands it out.
proto::TaskDef TaskOf(int64_t task_id, const Dataset& dataset, const std::string& read_secret,
                      const std::string& incarnation) {
  proto::TaskDef def;
  def.set_task_id(task_id);
  def.set_iteration_id(1);
  *def.mutable_dataset() = internal::DefinitionOf(dataset);
  def.set_processing_mode(proto::PARALLEL_EPOCHS);
  def.set_read_secret(read_secret);
  def.set_dispatcher_incarnation(incarnation);
  return def;
}

proto::WorkerHeartbeatResponse HeartbeatAnswer(const std::string& incarnation,
                                               const std::vector<proto::TaskDef>& new_tasks = {}) {
  proto::WorkerHeartbeatResponse response;
  response.set_dispatcher_incarnation(incarnation);
  for (const proto::TaskDef& def : new_tasks) *response.add_new_tasks() = def;
  return response;
}

// One GetElements of up to `max_elements` elements, waited for.
WorkerImpl::ElementsReply Get(WorkerImpl& worker, int64_t task_id, const std::string& secret,
                              int max_elements) {
  proto::GetElementsRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_task_id(task_id);
  request.set_task_secret(secret);
  request.set_max_elements(max_elements);
  auto reply = std::make_shared<std::promise<WorkerImpl::ElementsReply>>();
  std::future<WorkerImpl::ElementsReply> answered = reply->get_future();
  worker.GetElements(request, [reply](WorkerImpl::ElementsReply r) { reply->set_value(std::move(r)); });
  REQUIRE(answered.wait_for(absl::ToChronoSeconds(kWaitAtMost)) == std::future_status::ready);
  return answered.get();
}

// The values of every element of the task left to take, up to its end;
// an error or no end within kWaitAtMost fails the test. (A task the worker
// does not hold is answered empty, without an end, until then.)
std::vector<int64_t> ReadToEnd(WorkerImpl& worker, int64_t task_id, const std::string& secret) {
  std::vector<int64_t> values;
  const absl::Time give_up = absl::Now() + kWaitAtMost;
  while (absl::Now() < give_up) {
    WorkerImpl::ElementsReply reply = Get(worker, task_id, secret, 100);
    INFO(reply.status.ToString());
    REQUIRE(reply.status.ok());
    for (int64_t value : testing::Int64Values(reply.elements)) values.push_back(value);
    if (reply.end_of_sequence) return values;
  }
  FAIL("task " << task_id << " did not end within " << kWaitAtMost << "; it gave " << values.size()
               << " elements");
  return values;
}

// The first element of the task, waited for (the pipeline may not have
// produced it yet).
int64_t FirstElement(WorkerImpl& worker, int64_t task_id, const std::string& secret) {
  const absl::Time give_up = absl::Now() + kWaitAtMost;
  while (absl::Now() < give_up) {
    WorkerImpl::ElementsReply reply = Get(worker, task_id, secret, 1);
    INFO(reply.status.ToString());
    REQUIRE(reply.status.ok());
    REQUIRE_FALSE(reply.end_of_sequence);
    if (!reply.elements.empty()) return testing::Int64Values(reply.elements).at(0);
  }
  FAIL("task " << task_id << " gave no element within " << kWaitAtMost);
  return -1;
}

}  // namespace

// A dispatcher restarted without a work dir gives out task ids again from
// 1. A worker that kept the old task 7 ignored the new task 7 (it "ran"
// already), refused the new read secret, and served the old elements.
TEST_CASE("worker_impl: a task of another dispatcher incarnation is dropped before the new task of its id",
          "[worker][incarnation]") {
  FakeDispatcher dispatcher;
  const proto::TaskDef old_task = TaskOf(7, Dataset::Range(0, 5), "secret-of-old-7", "incarnation-a");
  const proto::TaskDef new_task = TaskOf(7, Dataset::Range(100, 103), "secret-of-new-7", "incarnation-b");
  dispatcher.Answer(HeartbeatAnswer("incarnation-a", {old_task}));
  WorkerImpl worker(FastConfig(dispatcher.address()));
  REQUIRE(worker.Start(kWorkerAddress).ok());
  // The old task runs and serves its reader.
  CHECK(FirstElement(worker, 7, "secret-of-old-7") == 0);

  const char* how = "";
  SECTION("in a heartbeat's new tasks") {
    how = "heartbeat";
    CHECK(dispatcher.AfterHandled(dispatcher.Answer(HeartbeatAnswer("incarnation-b", {new_task}))) ==
          std::vector<int64_t>{7});
  }
  SECTION("pushed (ProcessTask)") {
    how = "push";
    // Heartbeats that name no incarnation from here on, so that only the
    // push can tell the worker of the new one.
    dispatcher.AfterHandled(dispatcher.Answer(HeartbeatAnswer("")));
    proto::ProcessTaskRequest push;
    *push.mutable_version() = CurrentVersion();
    *push.mutable_task() = new_task;
    const absl::Status pushed = worker.ProcessTask(push);
    INFO(pushed.ToString());
    REQUIRE(pushed.ok());
  }
  INFO(how);
  // The new task's reader gets the new task's elements, all of them.
  CHECK(ReadToEnd(worker, 7, "secret-of-new-7") == std::vector<int64_t>{100, 101, 102});
  // The old task's reader gets nothing: its secret is not the task's. The
  // answer is the one for a task not here, so that it tells nobody where
  // a task runs.
  const WorkerImpl::ElementsReply old_reader = Get(worker, 7, "secret-of-old-7", 100);
  const WorkerImpl::ElementsReply nowhere = Get(worker, 123456, "secret-of-old-7", 100);
  for (const WorkerImpl::ElementsReply* reply : {&old_reader, &nowhere}) {
    CHECK(reply->status.ok());
    CHECK(reply->elements.empty());
    CHECK_FALSE(reply->end_of_sequence);
    // A reader of a task the dispatcher no longer lists stops there.
    CHECK(reply->task_not_here);
  }
  CHECK_FALSE(Get(worker, 7, "secret-of-new-7", 100).task_not_here);
}

TEST_CASE("worker_impl: heartbeats of the same dispatcher incarnation keep its tasks",
          "[worker][incarnation]") {
  FakeDispatcher dispatcher;
  const proto::TaskDef task = TaskOf(7, Dataset::Range(0, 5), "secret-of-7", "incarnation-a");
  dispatcher.Answer(HeartbeatAnswer("incarnation-a", {task}));
  WorkerImpl worker(FastConfig(dispatcher.address()));
  REQUIRE(worker.Start(kWorkerAddress).ok());
  CHECK(FirstElement(worker, 7, "secret-of-7") == 0);

  // Its id again, of the same incarnation, with another secret: the task
  // runs already, so nothing changes.
  const proto::TaskDef again = TaskOf(7, Dataset::Range(100, 103), "another-secret", "incarnation-a");
  CHECK(dispatcher.AfterHandled(dispatcher.Answer(HeartbeatAnswer("incarnation-a", {again}))) ==
        std::vector<int64_t>{7});
  // Another task of the same incarnation, and a heartbeat that names no
  // incarnation (a dispatcher that says nothing is no other one).
  const proto::TaskDef other = TaskOf(8, Dataset::Range(200, 202), "secret-of-8", "incarnation-a");
  CHECK(dispatcher.AfterHandled(dispatcher.Answer(HeartbeatAnswer("incarnation-a", {other}))) ==
        std::vector<int64_t>{7, 8});
  CHECK(dispatcher.AfterHandled(dispatcher.Answer(HeartbeatAnswer(""))) == std::vector<int64_t>{7, 8});

  // Task 7 still serves its own reader the rest of its elements.
  CHECK(ReadToEnd(worker, 7, "secret-of-7") == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(ReadToEnd(worker, 8, "secret-of-8") == std::vector<int64_t>{200, 201});
  const WorkerImpl::ElementsReply other_secret = Get(worker, 7, "another-secret", 100);
  CHECK(other_secret.status.ok());
  CHECK(other_secret.elements.empty());
  CHECK_FALSE(other_secret.end_of_sequence);
  CHECK(ReadToEnd(worker, 7, "secret-of-7").empty());  // the end, for its own reader only
}

}  // namespace sluice::worker

namespace sluice::worker {
namespace {

// A cross-trainer GetElements of `trainer`, waited for.
WorkerImpl::ElementsReply GetAs(WorkerImpl& worker, int64_t task_id, const std::string& secret,
                                const std::string& trainer, int max_elements) {
  proto::GetElementsRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_task_id(task_id);
  request.set_task_secret(secret);
  request.set_max_elements(max_elements);
  request.set_trainer_id(trainer);
  auto reply = std::make_shared<std::promise<WorkerImpl::ElementsReply>>();
  std::future<WorkerImpl::ElementsReply> answered = reply->get_future();
  worker.GetElements(request, [reply](WorkerImpl::ElementsReply r) { reply->set_value(std::move(r)); });
  REQUIRE(answered.wait_for(absl::ToChronoSeconds(kWaitAtMost)) == std::future_status::ready);
  return answered.get();
}

// `count` elements of `trainer`'s stream, over as many requests as the
// pipeline's pace takes; each response's first_index follows the last.
std::vector<int64_t> TakeAs(WorkerImpl& worker, int64_t task_id, const std::string& trainer, int64_t count,
                            int64_t* sent) {
  std::vector<int64_t> values;
  const absl::Time give_up = absl::Now() + kWaitAtMost;
  while (static_cast<int64_t>(values.size()) < count && absl::Now() < give_up) {
    WorkerImpl::ElementsReply reply = GetAs(worker, task_id, "secret", trainer,
                                            static_cast<int>(count - static_cast<int64_t>(values.size())));
    INFO(reply.status.ToString());
    REQUIRE(reply.status.ok());
    REQUIRE(reply.trainer_skipped == 0);
    if (reply.elements.empty()) continue;
    CHECK(reply.first_index == *sent);
    *sent += static_cast<int64_t>(reply.elements.size());
    for (int64_t value : testing::Int64Values(reply.elements)) values.push_back(value);
  }
  return values;
}

std::vector<int64_t> Iota(int64_t begin, int64_t end) {
  std::vector<int64_t> values;
  for (int64_t v = begin; v < end; ++v) values.push_back(v);
  return values;
}

}  // namespace

TEST_CASE("worker_impl: a cross-trainer task sends every trainer the whole stream from its own position",
          "[worker][cross_trainer]") {
  FakeDispatcher dispatcher;
  proto::TaskDef task = TaskOf(9, Dataset::Range(0, 100000), "secret", "incarnation-a");
  // Ten int64 scalars, as Range makes them.
  task.set_cross_trainer_cache_bytes(10 * ElementCost(Element::Of(Tensor::Scalar<int64_t>(0))));
  dispatcher.Answer(HeartbeatAnswer("incarnation-a", {task}));
  WorkerImpl worker(FastConfig(dispatcher.address()));
  REQUIRE(worker.Start(kWorkerAddress).ok());

  int64_t sent_a = 0;
  int64_t sent_b = 0;
  CHECK(TakeAs(worker, 9, "trainer-a", 5, &sent_a) == Iota(0, 5));
  // A trainer new to the task starts at the oldest element kept.
  CHECK(TakeAs(worker, 9, "trainer-b", 5, &sent_b) == Iota(0, 5));
  // trainer-a goes ahead; the worker keeps its last ten: [15, 25).
  CHECK(TakeAs(worker, 9, "trainer-a", 20, &sent_a) == Iota(5, 25));
  // trainer-b, at 5, fell behind: it skips ten and reads on from 15, and
  // first_index counts only what it was sent.
  WorkerImpl::ElementsReply behind = GetAs(worker, 9, "secret", "trainer-b", 3);
  REQUIRE(behind.status.ok());
  CHECK(behind.trainer_skipped == 10);
  CHECK(behind.first_index == 5);
  CHECK(testing::Int64Values(behind.elements) == Iota(15, 18));
  sent_b = 8;
  // Then from the cache up to the head, and on with trainer-a's stream.
  CHECK(TakeAs(worker, 9, "trainer-b", 10, &sent_b) == Iota(18, 28));
  CHECK(TakeAs(worker, 9, "trainer-a", 3, &sent_a) == Iota(25, 28));
  // A reader that names no trainer is refused, naming what it lacks.
  WorkerImpl::ElementsReply nameless = GetAs(worker, 9, "secret", "", 1);
  CHECK(nameless.status ==
        absl::InvalidArgumentError(
            "GetElements: a cross-trainer cache task needs a trainer_id of 1 to 128 bytes, got 0"));
}

}  // namespace sluice::worker
