// Compaction in two steps (Journal::BeginSnapshot, then WriteSnapshotFile
// without the writer's lock): what a work dir recovers when the second
// step never ran, failed, or ran.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "dispatcher/journal.h"
#include "tests/testing/journal_test_util.h"
#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

proto::StateSnapshot JobsSnapshot(int64_t next_job_id) {
  proto::StateSnapshot snapshot;
  snapshot.set_next_job_id(next_job_id);
  return snapshot;
}

TEST_CASE("journal: a snapshot begun but not written leaves the previous one and every journal file since",
          "[journal]") {
  testing::TempDir dir;
  int64_t sequence = 0;
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(journal.ok());
    REQUIRE(journal->Append(WorkerUpdate("a")).ok());
    REQUIRE(journal->WriteSnapshot(JobsSnapshot(7)).ok());  // snapshot-2, journal-2
    REQUIRE(journal->Write(WorkerUpdate("b")).ok());
    // b is not synced yet: beginning a snapshot syncs it before moving on.
    REQUIRE(journal->sync()->unsynced() == 1);
    absl::StatusOr<int64_t> begun = journal->BeginSnapshot();
    REQUIRE(begun.ok());
    sequence = *begun;
    CHECK(sequence == 3);
    CHECK(journal->sync()->unsynced() == 0);
    CHECK(journal->records_since_snapshot() == 0);
    REQUIRE(journal->Append(WorkerUpdate("c")).ok());
    // The writer died before writing snapshot-3.
  }
  CHECK(Files(dir.path()) == std::set<std::string>{"LOCK", "journal-0000000002.log", "journal-0000000003.log",
                                                   "snapshot-0000000002.pb"});
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(journal.ok());
    REQUIRE(recovered.snapshot.has_value());
    CHECK(recovered.snapshot->next_job_id() == 7);
    CHECK(Addresses(recovered) == std::vector<std::string>{"b", "c"});
    CHECK(recovered.warnings.empty());
  }
}

TEST_CASE("journal: a snapshot written after the journal moved on replaces exactly the files before it",
          "[journal]") {
  testing::TempDir dir;
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(journal.ok());
    REQUIRE(journal->Append(WorkerUpdate("a")).ok());
    absl::StatusOr<int64_t> begun = journal->BeginSnapshot();
    REQUIRE(begun.ok());
    // Appends go on while the snapshot is written.
    REQUIRE(journal->Append(WorkerUpdate("b")).ok());
    SECTION("written") {
      REQUIRE(Journal::WriteSnapshotFile(dir.path(), *begun, JobsSnapshot(9), journal->limits()).ok());
      CHECK(Files(dir.path()) ==
            std::set<std::string>{"LOCK", "journal-0000000002.log", "snapshot-0000000002.pb"});
      REQUIRE(journal->Append(WorkerUpdate("c")).ok());
      journal = absl::UnknownError("closed");
      Journal::Recovered reopened;
      REQUIRE(Journal::Open(dir.path(), &reopened).ok());
      REQUIRE(reopened.snapshot.has_value());
      CHECK(reopened.snapshot->next_job_id() == 9);
      CHECK(Addresses(reopened) == std::vector<std::string>{"b", "c"});
    }
    SECTION("failed: its temporary path is taken") {
      std::filesystem::create_directory(dir.File("snapshot-0000000002.pb.tmp/"));
      const absl::Status failed =
          Journal::WriteSnapshotFile(dir.path(), *begun, JobsSnapshot(9), journal->limits());
      CHECK_FALSE(failed.ok());
      CHECK(failed.message() ==
            "cannot create " + dir.File("snapshot-0000000002.pb.tmp") + ": Is a directory");
      std::filesystem::remove_all(dir.File("snapshot-0000000002.pb.tmp"));
      REQUIRE(journal->Append(WorkerUpdate("c")).ok());
      journal = absl::UnknownError("closed");
      Journal::Recovered reopened;
      REQUIRE(Journal::Open(dir.path(), &reopened).ok());
      CHECK_FALSE(reopened.snapshot.has_value());
      CHECK(Addresses(reopened) == std::vector<std::string>{"a", "b", "c"});
    }
  }
}

}  // namespace
}  // namespace sluice::dispatcher
