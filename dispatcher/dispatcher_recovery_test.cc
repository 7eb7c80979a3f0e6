// DispatcherImpl and its journal: recovery after a restart, compaction,
// and what a journal that cannot be written or read does.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/dataset_internal.h"
#include "dispatcher/dispatcher_impl.h"
#include "tests/testing/dispatcher_test_util.h"
#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

TEST_CASE("dispatcher_impl: a restarted dispatcher resumes from its work dir", "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  SECTION("from the journal") {}
  SECTION("from snapshots taken every 2 records") { config.snapshot_interval = 2; }
  proto::GetOrCreateIterationResponse it;
  int64_t job = 0;
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
    job = Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH, "named");
    it = Iteration(d, job);
    CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  }
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
  CHECK(Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH, "named") ==
        job);
  CHECK(Listed(ClientBeat(d, it.iteration_client_id())) == Listing{{1, "w1:1"}});
  // The worker's retry of its last request, then its next one.
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
  CHECK(Begins(Splits(d, it.iteration_id(), 1, 2, 2)) == BeginsAndSeqs{{20, 3}, {30, 4}});
  // Ids go on where they stood.
  const auto second = Iteration(d, job, 1);
  CHECK(second.iteration_id() == it.iteration_id() + 1);
  CHECK(second.iteration_client_id() == it.iteration_client_id() + 1);
}

// Whether a client was told its tasks is not journaled: after a restart
// every client of an unfinished iteration counts as told, so that a
// consumer that died with elements (or across the restart) still fails
// its peers' end rather than letting them end whole without its data.
TEST_CASE("dispatcher_impl: after a restart, a shared job's consumer that never returns fails its peers' end",
          "[dispatcher][lost_consumer]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  config.worker_timeout_ms = 1000;  // the monitor wakes every 100 ms
  config.client_timeout_ms = 2500;
  proto::GetOrCreateIterationResponse a;
  proto::GetOrCreateIterationResponse b;
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
    const int64_t job = Job(d, Register(d, SquaresDef()), proto::PARALLEL_EPOCHS, "shared");
    a = Iteration(d, job);
    b = Iteration(d, job);
    REQUIRE(b.iteration_id() == a.iteration_id());
    REQUIRE(Listed(ClientBeat(d, a.iteration_client_id())) == Listing{{1, "w1:1"}});
    REQUIRE(Listed(ClientBeat(d, b.iteration_client_id())) == Listing{{1, "w1:1"}});
  }
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  // b and the worker come back; a never does. The task finishes only once
  // a has been silent past kSilentPeerAtEnd.
  REQUIRE(Listed(ClientBeat(d, b.iteration_client_id())) == Listing{{1, "w1:1"}});
  KeepHeard(d, "w1:1", {1}, {b.iteration_client_id()}, kSilentPeerAtEnd + std::chrono::milliseconds(200));
  Finish(d, "w1:1", {1});
  const proto::ClientHeartbeatResponse held = ClientBeat(d, b.iteration_client_id());
  CHECK_FALSE(held.iteration_finished());
  CHECK(held.error_code() == 0);
  const proto::ClientHeartbeatResponse failed = BeatWhileHeld(d, b.iteration_client_id(), "w1:1", {1});
  CHECK(failed.error_code() == static_cast<int>(absl::StatusCode::kDataLoss));
  CHECK(
      failed.error_message() ==
      absl::StrCat("a consumer of job 'shared' (iteration client ", a.iteration_client_id(),
                   ") stopped heartbeating for 2500 ms (client_timeout_ms) while the epoch was read, and was "
                   "released: the elements it had taken from the workers reached no other consumer (killed "
                   "or frozen?); read the epoch again, or save and restore with exactly_once"));
  CHECK_FALSE(failed.iteration_finished());
}

// Peer readers tell a stale repetition from their own by the key that
// created it, so the key must survive a restart, journal or snapshot.
TEST_CASE("dispatcher_impl: an iteration's epoch key survives a restart", "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  SECTION("from the journal") {}
  SECTION("from snapshots taken every 2 records") { config.snapshot_interval = 2; }
  proto::GetOrCreateIterationRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_repetition(0);
  request.set_epoch_key("loader-5eed-0");
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
    request.set_job_id(
        Job(d, Register(d, internal::DefinitionOf(Dataset::Range(10))), proto::DISTRIBUTED_EPOCH, "peers"));
    proto::GetOrCreateIterationResponse created;
    REQUIRE(d.GetOrCreateIteration(request, &created).ok());
    CHECK(created.epoch_key() == "loader-5eed-0");
  }
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  // A peer of another epoch joining repetition 0 hears whose it is.
  request.set_epoch_key("loader-beef-0");
  proto::GetOrCreateIterationResponse joined;
  REQUIRE(d.GetOrCreateIteration(request, &joined).ok());
  CHECK(joined.epoch_key() == "loader-5eed-0");
  request.set_epoch_key(std::string(129, 'k'));
  const absl::Status refused = d.GetOrCreateIteration(request, &joined);
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.message()), Catch::Matchers::Contains("epoch_key"));
  CHECK_THAT(std::string(refused.message()), Catch::Matchers::Contains("at most 128 bytes"));
}

// LoseTask is journaled: a task ended because its readers could not reach
// its worker stays ended, and its iteration off that worker, after a
// restart.
TEST_CASE(
    "dispatcher_impl: a task ended for readers that cannot reach its worker stays ended after a restart",
    "[dispatcher][liveness]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  config.worker_timeout_ms = 1000;
  SECTION("from the journal") {}
  SECTION("from snapshots taken every 2 records") { config.snapshot_interval = 2; }
  proto::GetOrCreateIterationResponse a;
  proto::GetOrCreateIterationResponse b;
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
    a = Iteration(d,
                  Job(d, Register(d, internal::DefinitionOf(Dataset::Range(100))), proto::DISTRIBUTED_EPOCH));
    b = Iteration(d, Job(d, Register(d, SquaresDef())));
    REQUIRE(Begins(Splits(d, a.iteration_id(), 1, 2, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}});
    // w1 heartbeats (the monitor runs) while a's reader reports it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    proto::ClientHeartbeatResponse reported;
    while (reported.lost_tasks_size() == 0 && std::chrono::steady_clock::now() < deadline) {
      Heartbeat(d, "w1:1", {1, 2});
      reported = ClientReport(d, a.iteration_client_id(), {}, {"w1:1"});
      if (reported.lost_tasks_size() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(reported.lost_tasks_size() == 1);
    REQUIRE(reported.lost_tasks(0).task_id() == 1);
  }
  config.worker_timeout_ms = 60000;  // nothing times out while the test looks
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1"});
  const proto::ClientHeartbeatResponse after = ClientBeat(d, a.iteration_client_id());
  CHECK(after.tasks_size() == 0);
  REQUIRE(after.lost_tasks_size() == 1);
  CHECK(after.lost_tasks(0).task_id() == 1);
  CHECK(after.lost_tasks(0).worker_address() == "w1:1");
  CHECK_THAT(after.lost_tasks(0).reason(),
             Catch::Matchers::StartsWith("unreachable from clients for ") &&
                 Catch::Matchers::EndsWith(" ms though it heartbeats (check its advertised_address)"));
  CHECK_FALSE(after.iteration_finished());
  CHECK(Listed(ClientBeat(d, b.iteration_client_id())) == Listing{{2, "w1:1"}});
  const proto::WorkerHeartbeatResponse beat = Heartbeat(d, "w1:1", {1, 2});
  CHECK(std::vector<int64_t>(beat.tasks_to_delete().begin(), beat.tasks_to_delete().end()) ==
        std::vector<int64_t>{1});
  CHECK(beat.new_tasks_size() == 0);
  // Its returned splits go to the next worker, before new ones.
  CHECK(NewTaskIds(Heartbeat(d, "w2:2")) == std::vector<int64_t>{3, 4});
  CHECK(Begins(Splits(d, a.iteration_id(), 3, 4, 1)) == BeginsAndSeqs{{0, 1}, {10, 2}, {20, 3}, {30, 4}});
}

// An endless distributed_epoch read journals a LeaseSplits record per
// worker request, each of thousands of splits: before snapshot_bytes the
// work dir grew 380 KB/s (range 3 / repeat) until 10000 records.
TEST_CASE("dispatcher_impl: the journal is compacted after snapshot_bytes, whatever its record count",
          "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  config.snapshot_bytes = 100000;
  config.splits_per_request = 1000;
  proto::GetOrCreateIterationResponse it;
  int64_t job = 0;
  auto work_dir_bytes = [&] {
    int64_t bytes = 0;
    for (const auto& file : std::filesystem::directory_iterator(config.work_dir)) bytes += file.file_size();
    return bytes;
  };
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    Heartbeat(d, "w1:1");
    job = Job(d, Register(d, internal::DefinitionOf(Dataset::Range(3).Repeat())), proto::DISTRIBUTED_EPOCH,
              "endless");
    it = Iteration(d, job);
    int64_t largest = 0;
    for (int request = 1; request <= 200; ++request) {
      const proto::GetSplitsResponse splits = RawSplits(d, it.iteration_id(), 1, 1000, request);
      REQUIRE(splits.splits_size() == 1000);
      // Snapshots are written beside the requests; the files they replace
      // go once they are.
      d.WaitForSnapshot();
      largest = std::max(largest, work_dir_bytes());
    }
    // 200 records of 1000 splits, about 1.8 MB, never more than one
    // snapshot's worth of records at once.
    CHECK(largest < 120000);
  }
  // The newest snapshot is far past the first.
  std::set<std::string> names;
  for (const auto& file : std::filesystem::directory_iterator(config.work_dir)) {
    names.insert(file.path().filename().string());
  }
  REQUIRE(names.size() == 4);
  CHECK(names.erase("LOCK") == 1);
  CHECK(names.erase("client_secrets.key") == 1);
  CHECK(*names.begin() > "journal-0000000010.log");
  CHECK(*names.rbegin() > "snapshot-0000000010.pb");
  // Nothing was lost to the compactions: a restart goes on after split
  // 200000.
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1", {1});
  const proto::GetSplitsResponse next = RawSplits(d, it.iteration_id(), 1, 1, 201);
  REQUIRE(next.splits_size() == 1);
  CHECK(next.splits(0).seq() == 200001);
  CHECK(next.splits(0).begin() == 0);
  CHECK(next.splits(0).end() == 3);
}

// The logic class no longer ends the process itself: it reports the
// failure (dispatcherd's main exits with kJournalFailureExitCode) and
// refuses every later update, so nothing runs ahead of the disk.
TEST_CASE("dispatcher_impl: a journal that cannot be written is reported once, and later updates are refused",
          "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  config.snapshot_interval = 1;  // every update writes new files in work_dir
  std::vector<std::string> reported;
  DispatcherImpl d(config, nullptr,
                   [&](const absl::Status& status) { reported.emplace_back(status.message()); });
  REQUIRE(d.Start().ok());
  Heartbeat(d, "w1:1");
  d.WaitForSnapshot();  // its writer would put files back
  std::filesystem::remove_all(config.work_dir);
  proto::WorkerHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_worker_address("w2:2");
  proto::WorkerHeartbeatResponse response;
  const absl::Status failed = d.WorkerHeartbeat(request, &response);
  CHECK(absl::IsUnavailable(failed));
  CHECK_THAT(
      std::string(failed.message()),
      Catch::Matchers::StartsWith("the dispatcher cannot write its journal in " + config.work_dir + ": "));
  CHECK_THAT(std::string(failed.message()), Catch::Matchers::EndsWith("; it must be restarted"));
  REQUIRE(reported.size() == 1);
  CHECK(reported[0] == failed.message());
  request.set_worker_address("w3:3");
  CHECK(d.WorkerHeartbeat(request, &response) == failed);
  CHECK(reported.size() == 1);
}

TEST_CASE(
    "dispatcher_impl: a heartbeat's answer waits for the journal only when it tells the worker something",
    "[dispatcher]") {
  proto::WorkerHeartbeatResponse answer;
  answer.set_dispatcher_incarnation("abc");
  CHECK_FALSE(HeartbeatAnswerTellsAnything(answer));
  SECTION("a task to start") {
    answer.add_new_tasks()->set_task_id(3);
    CHECK(HeartbeatAnswerTellsAnything(answer));
  }
  SECTION("a task to drop") {
    answer.add_tasks_to_delete(3);
    CHECK(HeartbeatAnswerTellsAnything(answer));
  }
  SECTION("drain") {
    answer.set_drain(true);
    CHECK(HeartbeatAnswerTellsAnything(answer));
  }
}

TEST_CASE("dispatcher_impl: a damaged journal stops the start with its file and offset", "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.path();
  { std::ofstream(dir.File("journal-0000000001.log")) << "SLUJRNL1" << std::string(30, 'x'); }
  DispatcherImpl d(config);
  absl::Status status = d.Start();
  REQUIRE(absl::IsDataLoss(status));
  CHECK(status.message() == dir.File("journal-0000000001.log") + ": byte 8: record length checksum mismatch");
}

// The number of the newest snapshot in `dir` (they are numbered as written).
int64_t NewestSnapshot(const std::string& dir) {
  int64_t newest = -1;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("snapshot-") && name.ends_with(".pb")) {
      newest = std::max<int64_t>(newest, std::stoll(name.substr(9, name.size() - 12)));
    }
  }
  return newest;
}

// Snapshots are written after the lock is let go (StartSnapshot); one that
// cannot be written was the end of the dispatcher when it was written
// under the lock. Now the journal files it would have replaced stay, and
// nothing is lost.
TEST_CASE("dispatcher_impl: a snapshot that cannot be written stops no request and loses nothing",
          "[dispatcher]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  config.snapshot_interval = 2;
  std::vector<std::string> reported;
  {
    DispatcherImpl d(config, nullptr,
                     [&](const absl::Status& status) { reported.emplace_back(status.message()); });
    REQUIRE(d.Start().ok());
    const int64_t first = NewestSnapshot(config.work_dir);
    // The next snapshot's temporary file cannot be made.
    const std::string taken = absl::StrFormat("%s/snapshot-%010d.pb.tmp", config.work_dir, first + 1);
    std::filesystem::create_directory(taken);
    Heartbeat(d, "w1:1");
    Heartbeat(d, "w2:2");  // the second record since the start's snapshot
    d.WaitForSnapshot();
    CHECK(NewestSnapshot(config.work_dir) == first);
    Heartbeat(d, "w3:3");
    CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1", "w2:2", "w3:3"});
    std::filesystem::remove(taken);
  }
  CHECK(reported.empty());
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  CHECK(WorkerAddresses(d) == std::vector<std::string>{"w1:1", "w2:2", "w3:3"});
}

TEST_CASE("dispatcher_impl: registrations of large definitions do not rewrite the snapshot each time",
          "[dispatcher][tenants]") {
  // Issue 32, finding 2: each registration of a 60 MiB definition crossed
  // snapshot_bytes and rewrote every definition (10-16 s stalls). The
  // journal now grows to the last snapshot's size before compacting.
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  config.snapshot_bytes = 1024;
  const Tensor block(DType::kUInt8, {200000});
  {
    DispatcherImpl d(config);
    REQUIRE(d.Start().ok());
    const int64_t first = NewestSnapshot(config.work_dir);
    for (int i = 1; i <= 6; ++i) {
      Register(d, internal::DefinitionOf(Dataset::FromTensors({block}).Repeat(i)));
      d.WaitForSnapshot();
    }
    // 3 snapshots for 6 registrations (about 0.2, 0.6 and 1.2 MB), where
    // one each (4.2 MB in all) were written before.
    CHECK(NewestSnapshot(config.work_dir) - first == 3);
  }
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  CHECK(Snapshot(d).datasets_size() == 6);
}

}  // namespace
}  // namespace sluice::dispatcher
