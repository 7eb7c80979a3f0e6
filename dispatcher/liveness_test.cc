// DispatcherImpl's liveness: workers that shut down, stop heartbeating,
// restart or cannot be reached, and the monitor thread that removes them
// and collects abandoned iterations; consumers of a shared job lost at
// its end.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "dispatcher/dispatcher_impl.h"
#include "tests/testing/dispatcher_test_util.h"

namespace sluice::dispatcher {
namespace {

TEST_CASE("dispatcher_impl: WorkerShutdown ends the worker's tasks", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{1, "w1:1"}, {2, "w2:2"}});

  Shutdown(d, "w2:2");
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
  proto::ClientHeartbeatResponse after = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(after) == Listing{{1, "w1:1"}});
  CHECK_FALSE(after.iteration_finished());

  Shutdown(d, "w1:1");
  CHECK(WorkerAddresses(d).empty());
  proto::ClientHeartbeatResponse done = ClientBeat(d, it.iteration_client_id());
  CHECK(done.tasks_size() == 0);
  CHECK(done.iteration_finished());

  // Shutting down an unknown (or already gone) worker is fine.
  Shutdown(d, "w1:1");
  Shutdown(d, "nobody:9");
  proto::StatusSnapshot snapshot = Snapshot(d);
  CHECK(snapshot.workers_size() == 0);
  CHECK(snapshot.tasks_size() == 2);
  CHECK(snapshot.iterations(0).finished());
}

TEST_CASE("dispatcher_impl: a worker's shutdown finishes the iteration when the rest finished",
          "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  Finish(d, "w1:1", {1});
  CHECK_FALSE(ClientBeat(d, it.iteration_client_id()).iteration_finished());
  Shutdown(d, "w2:2");
  proto::ClientHeartbeatResponse response = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(response) == Listing{{1, "w1:1"}});
  CHECK(response.iteration_finished());
}

TEST_CASE("dispatcher_impl: the monitor removes workers that stop heartbeating", "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 200;
  config.client_timeout_ms = 200;
  // The only worker silent is a silent majority: the dispatcher suspects
  // itself and waits this long.
  config.silent_majority_timeout_ms = 1500;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  // The iteration first: the worker gets its task when it registers, so a
  // slow machine cannot lose the worker before the task exists.
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  const auto last_heartbeat = std::chrono::steady_clock::now();
  REQUIRE(NewTaskIds(Heartbeat(d, "w1:1")) == std::vector<int64_t>{1});

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool removed = false;
  bool released = false;
  while (std::chrono::steady_clock::now() < deadline && !(removed && released)) {
    proto::StatusSnapshot s = Snapshot(d);
    removed = s.workers_size() == 0;
    released = s.iterations_size() == 1 && s.iterations(0).num_clients() == 0;
    if (!(removed && released)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(removed);
  CHECK(released);
  // Not after worker_timeout_ms (200): after silent_majority_timeout_ms.
  CHECK(std::chrono::steady_clock::now() - last_heartbeat >= std::chrono::milliseconds(1500));
  proto::StatusSnapshot s = Snapshot(d);
  REQUIRE(s.iterations_size() == 1);
  // The lost worker's task ended, so the iteration did.
  CHECK(s.iterations(0).finished());
  CHECK(s.tasks_size() == 1);
  (void)it;

  // A worker that heartbeats again is registered again.
  Heartbeat(d, "w1:1");
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
}

TEST_CASE("dispatcher_impl: an iteration without clients is collected, one with a client never",
          "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.job_gc_timeout_ms = 200;
  config.job_retention_ms = 600000;  // the collected iteration stays in view
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1");
  const std::string dataset = Register(d, SquaresDef());
  const auto abandoned = Iteration(d, Job(d, dataset, proto::PARALLEL_EPOCHS, "abandoned"));
  const auto live = Iteration(d, Job(d, dataset, proto::PARALLEL_EPOCHS, "live"));
  REQUIRE(NewTaskIds(Heartbeat(d, "w1:1")) == std::vector<int64_t>{1, 2});
  proto::ReleaseIterationClientRequest release;
  *release.mutable_version() = CurrentVersion();
  release.set_iteration_client_id(abandoned.iteration_client_id());
  release.set_client_secret(abandoned.client_secret());
  proto::ReleaseIterationClientResponse released;
  REQUIRE(d.ReleaseIterationClient(release, &released).ok());

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline && !Snapshot(d).iterations(0).collected()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Well past the timeout, so that the live one would have gone too.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  proto::StatusSnapshot s = Snapshot(d);
  REQUIRE(s.iterations_size() == 2);
  CHECK(s.iterations(0).collected());
  CHECK(s.iterations(0).finished());
  CHECK_FALSE(s.iterations(1).collected());
  CHECK_FALSE(s.iterations(1).finished());

  // The worker drops the collected iteration's task and keeps the other.
  proto::WorkerHeartbeatResponse beat = Heartbeat(d, "w1:1", {1, 2});
  CHECK(std::vector<int64_t>(beat.tasks_to_delete().begin(), beat.tasks_to_delete().end()) ==
        std::vector<int64_t>{1});
  CHECK(beat.new_tasks_size() == 0);
  // A consumer joining the collected repetition ends at once: finished, no tasks.
  const auto late = Iteration(d, Job(d, dataset, proto::PARALLEL_EPOCHS, "abandoned"));
  CHECK(late.iteration_id() == abandoned.iteration_id());
  proto::ClientHeartbeatResponse joined = ClientBeat(d, late.iteration_client_id());
  CHECK(joined.iteration_finished());
  CHECK(joined.tasks_size() == 0);
  // A worker registering now gets no task of it.
  CHECK(NewTaskIds(Heartbeat(d, "w2:2")) == std::vector<int64_t>{3});
  CHECK(ClientBeat(d, live.iteration_client_id()).tasks_size() == 2);
}

TEST_CASE("dispatcher_impl: the monitor stops promptly on destruction", "[dispatcher]") {
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 60000;
  const auto start = std::chrono::steady_clock::now();
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
  }
  // The monitor waits up to worker_timeout_ms / 10 (6 s) between checks;
  // destruction wakes it at once.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
}

// Protocol (service.proto): "The iteration's live tasks; a task that
// disappears is over." A task that ended because its worker went away must
// not come back when a worker registers again at the same address (a
// restart on the same host:port): that worker no longer runs it.
TEST_CASE("dispatcher_impl: a removed worker's old tasks stay gone after it re-registers", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const int64_t job = Job(d, Register(d, SquaresDef()));
  const auto it = Iteration(d, job);
  Shutdown(d, "w2:2");
  proto::ClientHeartbeatResponse beat = ClientBeat(d, it.iteration_client_id());
  CHECK(Listed(beat) == Listing{{1, "w1:1"}});
  // Its readers learn that its epoch was cut short, and why.
  REQUIRE(beat.lost_tasks_size() == 1);
  CHECK(beat.lost_tasks(0).task_id() == 2);
  CHECK(beat.lost_tasks(0).worker_address() == "w2:2");
  CHECK(beat.lost_tasks(0).reason() == "worker shut down");
  // w2 comes back: in parallel_epochs it does not run this iteration's
  // epoch again (what it had delivered would repeat)...
  CHECK(NewTaskIds(Heartbeat(d, "w2:2")).empty());
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{1, "w1:1"}});
  // ...but runs the next one.
  const auto next = Iteration(d, job, 1);
  CHECK(Listed(ClientBeat(d, next.iteration_client_id())) == Listing{{3, "w1:1"}, {4, "w2:2"}});
}

std::vector<int64_t> Deleted(const proto::WorkerHeartbeatResponse& response) {
  return {response.tasks_to_delete().begin(), response.tasks_to_delete().end()};
}

// Issue 50, finding 9: a worker the dispatcher gave up (here by its
// shutdown; in the field by silence while only the dispatcher was cut off)
// may still serve. Where each worker runs the whole epoch nobody else runs
// its task, and its readers read it on (client/read/read_state.h,
// StillReading): it keeps the task until the iteration is collected. A
// distributed_epoch task's splits went to other tasks: it drops that one.
TEST_CASE(
    "dispatcher_impl: a worker back after it was given up keeps its whole-epoch tasks, and drops the rest",
    "[dispatcher][liveness]") {
  DispatcherConfig config = TestConfig();
  config.job_gc_timeout_ms = 100;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1");
  const auto whole = Iteration(d, Job(d, Register(d, SquaresDef())));
  const auto split =
      Iteration(d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(30))), proto::DISTRIBUTED_EPOCH));
  CHECK(Listed(ClientBeat(d, whole.iteration_client_id())) == Listing{{1, "w1:1"}});
  CHECK(Listed(ClientBeat(d, split.iteration_client_id())) == Listing{{2, "w1:1"}});
  Shutdown(d, "w1:1");
  const proto::ClientHeartbeatResponse unlisted = ClientBeat(d, whole.iteration_client_id());
  CHECK(unlisted.tasks_size() == 0);
  REQUIRE(unlisted.lost_tasks_size() == 1);
  CHECK(unlisted.lost_tasks(0).task_id() == 1);

  // Back with both: it keeps task 1, drops task 2, and gets no new task
  // of either iteration (task 1's epoch would repeat; task 2's splits wait
  // for the next task, which is this worker's only as a new one).
  const proto::WorkerHeartbeatResponse back = Heartbeat(d, "w1:1", {1, 2});
  CHECK(Deleted(back) == std::vector<int64_t>{2});
  CHECK(NewTaskIds(back) == std::vector<int64_t>{3});
  CHECK(Listed(ClientBeat(d, split.iteration_client_id())) == Listing{{3, "w1:1"}});
  CHECK(Deleted(Heartbeat(d, "w1:1", {1, 3})).empty());
  // The dispatcher does not list task 1 again: the reader already counts
  // it as one to read on.
  CHECK(ClientBeat(d, whole.iteration_client_id()).tasks_size() == 0);
  // Its pipeline failing there fails no iteration: its loss is counted
  // already, and a reader that reads it on hears the error from the worker.
  proto::WorkerUpdatesRequest failed;
  *failed.mutable_version() = CurrentVersion();
  failed.set_worker_address("w1:1");
  failed.add_failed_tasks()->set_task_id(1);
  failed.mutable_failed_tasks(0)->set_code(static_cast<int>(absl::StatusCode::kInternal));
  failed.mutable_failed_tasks(0)->set_message("boom");
  proto::WorkerUpdatesResponse updated;
  REQUIRE(d.WorkerUpdates(failed, &updated).ok());
  CHECK(ClientBeat(d, whole.iteration_client_id()).error_code() == 0);

  // Once its reader leaves and the iteration is collected, it goes.
  proto::ReleaseIterationClientRequest release;
  *release.mutable_version() = CurrentVersion();
  release.set_iteration_client_id(whole.iteration_client_id());
  release.set_client_secret(whole.client_secret());
  proto::ReleaseIterationClientResponse released;
  REQUIRE(d.ReleaseIterationClient(release, &released).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<int64_t> deleted;
  while (std::chrono::steady_clock::now() < deadline && deleted.empty()) {
    deleted = Deleted(Heartbeat(d, "w1:1", {1, 3}));
    if (deleted.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(deleted == std::vector<int64_t>{1});
}

TEST_CASE("dispatcher_impl: a worker restarted at the same address loses its old tasks", "[dispatcher]") {
  DispatcherImpl d(TestConfig());
  auto beat = [&](const std::string& incarnation, const std::vector<int64_t>& current) {
    proto::WorkerHeartbeatRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_worker_address("w1:1");
    request.set_incarnation(incarnation);
    for (int64_t id : current) request.add_current_tasks(id);
    proto::WorkerHeartbeatResponse response;
    REQUIRE(d.WorkerHeartbeat(request, &response).ok());
    return response;
  };
  beat("first", {});
  const auto it =
      Iteration(d, Job(d, Register(d, internal::DefinitionOf(Dataset::Range(30))), proto::DISTRIBUTED_EPOCH));
  Splits(d, it.iteration_id(), 1, 2, 1);
  CHECK(NewTaskIds(beat("first", {1})).empty());
  // The same address, a new process: task 1 is lost, task 2 takes its splits.
  CHECK(NewTaskIds(beat("second", {})) == std::vector<int64_t>{2});
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{2, "w1:1"}});
  CHECK(Begins(Splits(d, it.iteration_id(), 2, 4, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}, {20, 3}});
}

TEST_CASE("dispatcher_impl: a client's report removes an unreachable worker only when it is silent",
          "[dispatcher][liveness]") {
  DispatcherImpl d(TestConfig());
  Heartbeat(d, "w1:1");
  Heartbeat(d, "w2:2");
  const auto it = Iteration(d, Job(d, Register(d, SquaresDef())));
  // Heard from just now: a client's trouble reaching it is not enough.
  CHECK(Listed(ClientReport(d, it.iteration_client_id(), {}, {"w1:1"})) == Listing{{1, "w1:1"}, {2, "w2:2"}});
  std::this_thread::sleep_for(kUnreachableWorkerSilence + std::chrono::milliseconds(100));
  Heartbeat(d, "w2:2", {2});
  CHECK(Listed(ClientReport(d, it.iteration_client_id(), {}, {"w1:1", "w2:2", "nobody:3"})) ==
        Listing{{2, "w2:2"}});
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w2:2"});
}

// An iteration of `tenant`'s own job over its own dataset.
proto::GetOrCreateIterationResponse TenantIteration(DispatcherImpl& d, const std::string& tenant,
                                                    const proto::DatasetDef& def,
                                                    proto::ProcessingMode mode) {
  const Caller caller{.tenant = tenant};
  proto::GetOrCreateJobRequest job;
  job.mutable_params()->set_dataset_id(
      CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(def, ""), caller).dataset_id());
  job.mutable_params()->set_processing_mode(mode);
  proto::GetOrCreateIterationRequest iteration;
  iteration.set_job_id(CallOk(d, &DispatcherImpl::GetOrCreateJob, job, caller).job_id());
  return CallOk(d, &DispatcherImpl::GetOrCreateIteration, iteration, caller);
}

// Workers serve every tenant, and any client may report: a reader that
// cannot reach a worker which still heartbeats ends its own iteration's
// tasks there, never the worker (and other tenants' tasks with it).
TEST_CASE("dispatcher_impl: a report of a worker that heartbeats ends only the reporter's tasks there",
          "[dispatcher][liveness]") {
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 300;
  DispatcherImpl d(config);
  Heartbeat(d, "w1:1");
  // Tenant a reads distributed_epoch (task 1), tenant b parallel_epochs
  // (task 2), both on w1.
  const auto a =
      TenantIteration(d, "a", internal::DefinitionOf(Dataset::Range(100)), proto::DISTRIBUTED_EPOCH);
  const auto b = TenantIteration(d, "b", SquaresDef(), proto::PARALLEL_EPOCHS);
  CHECK(Begins(Splits(d, a.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});

  // a's reader cannot reach w1, which heartbeats all along.
  CHECK(Listed(ClientReport(d, a.iteration_client_id(), {}, {"w1:1"})) == Listing{{1, "w1:1"}});
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  Heartbeat(d, "w1:1", {1, 2});
  const proto::ClientHeartbeatResponse reported = ClientReport(d, a.iteration_client_id(), {}, {"w1:1"});
  CHECK(reported.tasks_size() == 0);
  REQUIRE(reported.lost_tasks_size() == 1);
  CHECK(reported.lost_tasks(0).task_id() == 1);
  CHECK(reported.lost_tasks(0).worker_address() == "w1:1");
  CHECK_THAT(reported.lost_tasks(0).reason(),
             Catch::Matchers::StartsWith("unreachable from clients for ") &&
                 Catch::Matchers::EndsWith(" ms though it heartbeats (check its advertised_address)"));
  // Its leased splits wait for a reader.
  CHECK_FALSE(reported.iteration_finished());

  // b's task on w1 runs on, and w1 stays.
  const proto::ClientHeartbeatResponse other = ClientBeat(d, b.iteration_client_id());
  CHECK(Listed(other) == Listing{{2, "w1:1"}});
  CHECK(other.lost_tasks_size() == 0);
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
  // w1 drops a's task, and is not given a task of a again.
  const proto::WorkerHeartbeatResponse beat = Heartbeat(d, "w1:1", {1, 2});
  CHECK(Deleted(beat) == std::vector<int64_t>{1});
  CHECK(beat.new_tasks_size() == 0);

  // The next worker takes a's splits (returned ones first); w2 also joins b.
  CHECK(NewTaskIds(Heartbeat(d, "w2:2")) == std::vector<int64_t>{3, 4});
  CHECK(Listed(ClientBeat(d, a.iteration_client_id())) == Listing{{3, "w2:2"}});
  CHECK(Begins(Splits(d, a.iteration_id(), 3, 4, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}, {20, 3}, {30, 4}});
  CHECK(Listed(ClientBeat(d, b.iteration_client_id())) == Listing{{2, "w1:1"}, {4, "w2:2"}});
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1", "w2:2"});
}

TEST_CASE("dispatcher_impl: a client whose iteration has no task on a worker cannot end or remove it",
          "[dispatcher][liveness]") {
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 300;
  DispatcherImpl d(config);
  Heartbeat(d, "w1:1");
  // Tenant a's iteration ran on w1 alone, and was read to its end.
  const auto a = TenantIteration(d, "a", SquaresDef(), proto::PARALLEL_EPOCHS);
  Finish(d, "w1:1", {1});
  REQUIRE(ClientReport(d, a.iteration_client_id(), {1}).iteration_finished());
  // Tenant b's iteration runs on w1 and w2.
  REQUIRE(NewTaskIds(Heartbeat(d, "w2:2")).empty());
  const auto b = TenantIteration(d, "b", SquaresDef(), proto::PARALLEL_EPOCHS);
  REQUIRE(Listed(ClientBeat(d, b.iteration_client_id())) == Listing{{2, "w1:1"}, {3, "w2:2"}});

  const std::vector<std::string> all = {"w1:1", "w2:2", "nobody:3"};
  auto unharmed = [&] {
    CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1", "w2:2"});
    const proto::ClientHeartbeatResponse beat = ClientBeat(d, b.iteration_client_id());
    CHECK(Listed(beat) == Listing{{2, "w1:1"}, {3, "w2:2"}});
    CHECK(beat.lost_tasks_size() == 0);
    CHECK_FALSE(beat.iteration_finished());
  };
  // a reports every worker for longer than worker_timeout_ms while they
  // heartbeat...
  ClientReport(d, a.iteration_client_id(), {}, all);
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  CHECK(Deleted(Heartbeat(d, "w1:1", {2})).empty());
  CHECK(Deleted(Heartbeat(d, "w2:2", {3})).empty());
  ClientReport(d, a.iteration_client_id(), {}, all);
  unharmed();
  // ...and while they are silent.
  std::this_thread::sleep_for(kUnreachableWorkerSilence + std::chrono::milliseconds(100));
  ClientReport(d, a.iteration_client_id(), {}, all);
  unharmed();
  CHECK(Deleted(Heartbeat(d, "w1:1", {2})).empty());

  // b's reader, with a task on w2, is heard: silent, w2 goes.
  const proto::ClientHeartbeatResponse heard = ClientReport(d, b.iteration_client_id(), {}, {"w2:2"});
  CHECK(Listed(heard) == Listing{{2, "w1:1"}});
  REQUIRE(heard.lost_tasks_size() == 1);
  CHECK(heard.lost_tasks(0).task_id() == 3);
  CHECK(heard.lost_tasks(0).reason() == "unreachable from a client and silent");
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
}

// Two consumers of the named parallel_epochs job "shared", a and b, both
// told its one task (on w1:1); the task then finished.
struct SharedRead {
  proto::GetOrCreateIterationResponse a;
  proto::GetOrCreateIterationResponse b;
};

SharedRead ReadToTheEnd(DispatcherImpl& d) {
  Heartbeat(d, "w1:1");
  const int64_t job = Job(d, Register(d, SquaresDef()), proto::PARALLEL_EPOCHS, "shared");
  SharedRead read{Iteration(d, job), Iteration(d, job)};
  REQUIRE(read.b.iteration_id() == read.a.iteration_id());
  REQUIRE(Listed(ClientBeat(d, read.a.iteration_client_id())) == Listing{{1, "w1:1"}});
  REQUIRE(Listed(ClientBeat(d, read.b.iteration_client_id())) == Listing{{1, "w1:1"}});
  Finish(d, "w1:1", {1});
  return read;
}

// A consumer that had its task's read secret may have taken elements that
// reached no one else; one told the end, or gone by its own release, had
// nothing more to take. Its silence must not hold or fail the others' end.
TEST_CASE("dispatcher_impl: a consumer of a shared job told the end, or released, is not lost when silent",
          "[dispatcher][liveness][lost_consumer]") {
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 1000;  // the monitor wakes every 100 ms
  config.client_timeout_ms = 1500;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  proto::GetOrCreateIterationResponse a;
  proto::GetOrCreateIterationResponse b;
  SECTION("told the end by its heartbeat") {
    const SharedRead read = ReadToTheEnd(d);
    a = read.a;
    b = read.b;
    const proto::ClientHeartbeatResponse end = ClientBeat(d, a.iteration_client_id());
    CHECK(end.iteration_finished());
    CHECK(end.error_code() == 0);
  }
  SECTION("released by itself") {
    const SharedRead read = ReadToTheEnd(d);
    a = read.a;
    b = read.b;
    proto::ReleaseIterationClientRequest release;
    *release.mutable_version() = CurrentVersion();
    release.set_iteration_client_id(a.iteration_client_id());
    release.set_client_secret(a.client_secret());
    proto::ReleaseIterationClientResponse released;
    REQUIRE(d.ReleaseIterationClient(release, &released).ok());
  }
  SECTION("never told the task") {
    Heartbeat(d, "w1:1");
    const int64_t job = Job(d, Register(d, SquaresDef()), proto::PARALLEL_EPOCHS, "shared");
    a = Iteration(d, job);  // joins, and is never heard again
    b = Iteration(d, job);
    REQUIRE(Listed(ClientBeat(d, b.iteration_client_id())) == Listing{{1, "w1:1"}});
    Finish(d, "w1:1", {1});
  }
  // a is silent from here on: past kSilentPeerAtEnd, and past its release
  // for silence, every answer to b is the end, whole.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(config.client_timeout_ms) +
                     std::chrono::milliseconds(500);
  int64_t answers = 0;
  while (std::chrono::steady_clock::now() < until) {
    Heartbeat(d, "w1:1", {1});
    const proto::ClientHeartbeatResponse response = ClientBeat(d, b.iteration_client_id());
    INFO("answer " << answers << ": " << response.error_message());
    REQUIRE(response.iteration_finished());
    REQUIRE(response.error_code() == 0);
    ++answers;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(answers >= 10);
  // a is gone from the iteration (released, by itself or for silence).
  const proto::StatusSnapshot snapshot = Snapshot(d);
  REQUIRE(snapshot.iterations_size() == 1);
  CHECK(snapshot.iterations(0).num_clients() == 1);
  const proto::ClientHeartbeatResponse last = ClientBeat(d, b.iteration_client_id());
  CHECK(last.iteration_finished());
  CHECK(last.error_code() == 0);
  CHECK(last.error_message().empty());
}

// tests/integration/lost_consumer_test.cc kills such a consumer under real
// daemons; here the hold, its end and the message, exactly.
TEST_CASE(
    "dispatcher_impl: a consumer of a shared job silent after taking its task holds the end, then fails it",
    "[dispatcher][liveness][lost_consumer]") {
  DispatcherConfig config = TestConfig();
  config.worker_timeout_ms = 1000;  // the monitor wakes every 100 ms
  config.client_timeout_ms = 2500;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  const SharedRead read = ReadToTheEnd(d);
  const int64_t a = read.a.iteration_client_id();
  const int64_t b = read.b.iteration_client_id();
  // a, told its task, is silent for longer than kSilentPeerAtEnd (b is
  // not told the end meanwhile: it does not heartbeat).
  KeepHeard(d, "w1:1", {1}, {}, kSilentPeerAtEnd + std::chrono::milliseconds(200));
  const proto::ClientHeartbeatResponse held = ClientBeat(d, b);
  CHECK_FALSE(held.iteration_finished());
  CHECK(held.error_code() == 0);
  CHECK(Listed(held) == Listing{{1, "w1:1"}});
  SECTION("and is never heard again") {
    const proto::ClientHeartbeatResponse failed = BeatWhileHeld(d, b, "w1:1", {1});
    CHECK(failed.error_code() == static_cast<int>(absl::StatusCode::kDataLoss));
    CHECK(failed.error_message() ==
          absl::StrCat(
              "a consumer of job 'shared' (iteration client ", a,
              ") stopped heartbeating for 2500 ms (client_timeout_ms) while the epoch was read, and was "
              "released: the elements it had taken from the workers reached no other consumer (killed "
              "or frozen?); read the epoch again, or save and restore with exactly_once"));
    CHECK_FALSE(failed.iteration_finished());
    // So it stays, for every later heartbeat of b.
    const proto::ClientHeartbeatResponse again = ClientBeat(d, b);
    CHECK(again.error_code() == static_cast<int>(absl::StatusCode::kDataLoss));
    CHECK(again.error_message() == failed.error_message());
  }
  SECTION("and is heard again (a frozen process resumed)") {
    const proto::ClientHeartbeatResponse back = ClientBeat(d, a);
    CHECK(back.iteration_finished());
    CHECK(back.error_code() == 0);
    const proto::ClientHeartbeatResponse end = ClientBeat(d, b);
    CHECK(end.iteration_finished());
    CHECK(end.error_code() == 0);
  }
}

}  // namespace
}  // namespace sluice::dispatcher
