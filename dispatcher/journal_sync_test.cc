// Group commit (journal_sync.h): records written without waiting, made
// durable by syncs that each cover every record written before them.
#include "dispatcher/journal_sync.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "dispatcher/journal.h"
#include "tests/testing/journal_test_util.h"
#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
TEST_CASE("journal_sync: one sync covers every record written before it", "[journal]") {
  testing::TempDir dir;
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.File("work"), &recovered);
  REQUIRE(journal.ok());
  const std::shared_ptr<JournalSync> sync = journal->sync();
  const int64_t syncs_at_open = sync->syncs();
  for (int i = 0; i < 3; ++i) REQUIRE(journal->Write(WorkerUpdate("w" + std::to_string(i))).ok());
  CHECK(sync->unsynced() == 3);
  REQUIRE(sync->SyncWritten().ok());
  CHECK(sync->unsynced() == 0);
  CHECK(sync->syncs() == syncs_at_open + 1);
  // Nothing written since: no sync at all.
  REQUIRE(sync->SyncWritten().ok());
  CHECK(sync->syncs() == syncs_at_open + 1);
  // A snapshot syncs the file it moves on from (only the last journal
  // file may end torn): one sync for its records, none after.
  REQUIRE(journal->Write(WorkerUpdate("w3")).ok());
  REQUIRE(journal->WriteSnapshot(proto::StateSnapshot()).ok());
  CHECK(sync->unsynced() == 0);
  CHECK(sync->syncs() == syncs_at_open + 2);
  REQUIRE(sync->SyncWritten().ok());
  CHECK(sync->syncs() == syncs_at_open + 2);
}

TEST_CASE("journal_sync: writers under one lock, each syncing after it, lose no record", "[journal]") {
  testing::TempDir dir;
  constexpr int kThreads = 8;
  constexpr int kEach = 100;
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.File("work"), &recovered);
    REQUIRE(journal.ok());
    const std::shared_ptr<JournalSync> sync = journal->sync();
    const int64_t syncs_at_open = sync->syncs();
    absl::Mutex lock;  // the dispatcher's mu_
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          {
            absl::MutexLock hold(&lock);
            if (!journal->Write(WorkerUpdate(std::to_string(t) + "/" + std::to_string(i))).ok()) ++failures;
          }
          if (!sync->SyncWritten().ok()) ++failures;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK(failures == 0);
    CHECK(sync->unsynced() == 0);
    // Concurrent requests may share syncs; never more syncs than records.
    CHECK(sync->syncs() - syncs_at_open <= kThreads * kEach);
  }
  Journal::Recovered recovered;
  REQUIRE(Journal::Open(dir.File("work"), &recovered).ok());
  REQUIRE(recovered.updates.size() == kThreads * kEach);
  std::vector<int> next(kThreads, 0);
  for (const auto& record : recovered.updates) {
    // Each writer's records come back in its order.
    const std::string& address = record.update.register_worker().address();
    const int t = std::stoi(address.substr(0, address.find('/')));
    CHECK(address == std::to_string(t) + "/" + std::to_string(next[t]++));
  }
}

TEST_CASE("journal_sync: a sync that fails fails every later wait, naming the file", "[journal]") {
  JournalSync sync;
  // A descriptor that is not open: fdatasync fails (EBADF).
  sync.SetFile(std::make_shared<JournalFile>(-1, "/work/journal-0000000001.log"));
  CHECK(sync.SyncWritten().ok());  // nothing written, nothing to sync
  sync.Written();
  const absl::Status first = sync.SyncWritten();
  REQUIRE_FALSE(first.ok());
  CHECK(first.message() == "cannot sync /work/journal-0000000001.log: Bad file descriptor");
  CHECK(sync.SyncWritten() == first);
  CHECK(sync.unsynced() == 1);
}

}  // namespace sluice::dispatcher
