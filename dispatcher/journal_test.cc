#include "dispatcher/journal.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

constexpr int64_t kMagicBytes = 8;
constexpr int64_t kFramingBytes = 12;  // length, length CRC, payload CRC

proto::Update WorkerUpdate(const std::string& address) {
  proto::Update update;
  update.mutable_register_worker()->set_address(address);
  return update;
}

// Addresses of the RegisterWorker updates recovered, in order.
std::vector<std::string> Addresses(const Journal::Recovered& recovered) {
  std::vector<std::string> addresses;
  for (const auto& record : recovered.updates) addresses.push_back(record.update.register_worker().address());
  return addresses;
}

std::set<std::string> Files(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

int64_t RecordBytes(const proto::Update& update) {
  return kFramingBytes + static_cast<int64_t>(update.ByteSizeLong());
}

// Writes updates for w0..w{n-1} into a new journal in `dir`.
void WriteWorkers(const std::string& dir, int n) {
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir, &recovered);
  REQUIRE(journal.ok());
  for (int i = 0; i < n; ++i) REQUIRE(journal->Append(WorkerUpdate("w" + std::to_string(i))).ok());
}

void FlipByte(const std::string& path, int64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char c = 0;
  file.get(c);
  file.seekp(offset);
  file.put(static_cast<char>(c ^ 0x5a));
}

TEST_CASE("journal: appended updates come back in order after a reopen", "[journal]") {
  testing::TempDir dir;
  WriteWorkers(dir.File("work"), 3);
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.File("work"), &recovered);
  REQUIRE(journal.ok());
  CHECK(Addresses(recovered) == std::vector<std::string>{"w0", "w1", "w2"});
  CHECK_FALSE(recovered.snapshot.has_value());
  CHECK(recovered.warnings.empty());
  CHECK(recovered.updates[1].file == dir.File("work") + "/journal-0000000001.log");
  CHECK(recovered.updates[1].offset == kMagicBytes + RecordBytes(WorkerUpdate("w0")));
  CHECK(journal->records_since_snapshot() == 3);
  // Appends after a reopen go to a new file.
  CHECK(Files(dir.File("work")) ==
        std::set<std::string>{"LOCK", "journal-0000000001.log", "journal-0000000002.log"});
}

TEST_CASE("journal: a snapshot replaces the records before it", "[journal]") {
  testing::TempDir dir;
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(journal.ok());
    REQUIRE(journal->Append(WorkerUpdate("before")).ok());
    proto::StateSnapshot snapshot;
    snapshot.set_next_task_id(42);
    REQUIRE(journal->WriteSnapshot(snapshot).ok());
    CHECK(journal->records_since_snapshot() == 0);
    REQUIRE(journal->Append(WorkerUpdate("after")).ok());
    CHECK(Files(dir.path()) ==
          std::set<std::string>{"LOCK", "snapshot-0000000002.pb", "journal-0000000002.log"});
  }
  Journal::Recovered recovered;
  REQUIRE(Journal::Open(dir.path(), &recovered).ok());
  REQUIRE(recovered.snapshot.has_value());
  CHECK(recovered.snapshot->next_task_id() == 42);
  CHECK(Addresses(recovered) == std::vector<std::string>{"after"});
  CHECK(recovered.warnings.empty());
}

TEST_CASE("journal: a torn tail record is cut off with a warning", "[journal]") {
  testing::TempDir dir;
  WriteWorkers(dir.path(), 3);
  const std::string path = dir.File("journal-0000000001.log");
  const int64_t two_records = kMagicBytes + RecordBytes(WorkerUpdate("w0")) + RecordBytes(WorkerUpdate("w1"));
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(path));
  REQUIRE(size == two_records + RecordBytes(WorkerUpdate("w2")));
  // A crash three bytes before the end of the last write.
  REQUIRE(::truncate(path.c_str(), size - 3) == 0);

  Journal::Recovered recovered;
  REQUIRE(Journal::Open(dir.path(), &recovered).ok());
  CHECK(Addresses(recovered) == std::vector<std::string>{"w0", "w1"});
  const int64_t payload = static_cast<int64_t>(WorkerUpdate("w2").ByteSizeLong());
  REQUIRE(recovered.warnings.size() == 1);
  CHECK(recovered.warnings[0] == path + ": torn record at byte " + std::to_string(two_records) +
                                     " (record of " + std::to_string(payload) + " bytes cut short at " +
                                     std::to_string(payload + 1) + "): truncated, " +
                                     std::to_string(size - 3 - two_records) + " bytes dropped");
  CHECK(static_cast<int64_t>(std::filesystem::file_size(path)) == two_records);

  // The cut is lasting: the next open sees two records and no damage.
  Journal::Recovered again;
  REQUIRE(Journal::Open(dir.path(), &again).ok());
  CHECK(Addresses(again) == std::vector<std::string>{"w0", "w1"});
  CHECK(again.warnings.empty());
}

TEST_CASE("journal: zeros after the last record are a torn tail", "[journal]") {
  testing::TempDir dir;
  WriteWorkers(dir.path(), 1);
  const std::string path = dir.File("journal-0000000001.log");
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(path));
  { std::ofstream(path, std::ios::app | std::ios::binary) << std::string(20, '\0'); }
  Journal::Recovered recovered;
  REQUIRE(Journal::Open(dir.path(), &recovered).ok());
  CHECK(Addresses(recovered) == std::vector<std::string>{"w0"});
  REQUIRE(recovered.warnings.size() == 1);
  CHECK(recovered.warnings[0] == path + ": torn record at byte " + std::to_string(size) +
                                     " (zeroed record): truncated, 20 bytes dropped");
}

TEST_CASE("journal: a corrupt record before the tail is an error naming file and offset", "[journal]") {
  testing::TempDir dir;
  WriteWorkers(dir.path(), 3);
  const std::string path = dir.File("journal-0000000001.log");
  const int64_t second = kMagicBytes + RecordBytes(WorkerUpdate("w0"));

  SECTION("in a payload") {
    FlipByte(path, second + 9);
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(absl::IsDataLoss(journal.status()));
    CHECK(journal.status().message() ==
          path + ": byte " + std::to_string(second) + ": record checksum mismatch");
  }
  SECTION("in a length") {
    FlipByte(path, second);
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(absl::IsDataLoss(journal.status()));
    CHECK(journal.status().message() ==
          path + ": byte " + std::to_string(second) + ": record length checksum mismatch");
  }
  SECTION("in the file's magic") {
    FlipByte(path, 0);
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(absl::IsDataLoss(journal.status()));
    CHECK(journal.status().message() == path + ": byte 0: not a Sluice journal (bad magic)");
  }
  // Nothing was truncated or deleted.
  CHECK(std::filesystem::exists(path));
  CHECK(static_cast<int64_t>(std::filesystem::file_size(path)) ==
        second + RecordBytes(WorkerUpdate("w1")) + RecordBytes(WorkerUpdate("w2")));
}

TEST_CASE("journal: a torn record in an older journal file is an error", "[journal]") {
  testing::TempDir dir;
  WriteWorkers(dir.path(), 2);  // journal 1
  WriteWorkers(dir.path(), 1);  // reopens: journal 2
  const std::string path = dir.File("journal-0000000001.log");
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(path));
  REQUIRE(::truncate(path.c_str(), size - 1) == 0);
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
  REQUIRE(absl::IsDataLoss(journal.status()));
  const int64_t second = kMagicBytes + RecordBytes(WorkerUpdate("w0"));
  const int64_t payload = static_cast<int64_t>(WorkerUpdate("w1").ByteSizeLong());
  CHECK(journal.status().message() == path + ": byte " + std::to_string(second) + ": record of " +
                                          std::to_string(payload) + " bytes cut short at " +
                                          std::to_string(payload + 3) +
                                          " in a journal file that is not the newest");
}

TEST_CASE("journal: a damaged snapshot is an error naming it", "[journal]") {
  testing::TempDir dir;
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(journal.ok());
    proto::StateSnapshot snapshot;
    snapshot.set_next_job_id(7);
    REQUIRE(journal->WriteSnapshot(snapshot).ok());
  }
  const std::string path = dir.File("snapshot-0000000002.pb");
  FlipByte(path, kMagicBytes + kFramingBytes - 4 + 1);  // inside the payload
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
  REQUIRE(absl::IsDataLoss(journal.status()));
  CHECK(journal.status().message() == path + ": byte 8: record checksum mismatch");
}

TEST_CASE("journal: a work dir that cannot be created is a clear error", "[journal]") {
  testing::TempDir dir;
  { std::ofstream(dir.File("file")) << "x"; }
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.File("file") + "/work", &recovered);
  REQUIRE(absl::IsInvalidArgument(journal.status()));
  CHECK(journal.status().message() == "work dir " + dir.File("file") + "/work: Not a directory");
}

TEST_CASE("journal: a work dir held by a live journal is refused before anything in it changes",
          "[journal]") {
  testing::TempDir dir;
  std::set<std::string> files_held;
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> held = Journal::Open(dir.path(), &recovered);
    REQUIRE(held.ok());
    REQUIRE(held->Append(WorkerUpdate("w0")).ok());
    files_held = Files(dir.path());
    Journal::Recovered second_recovered;
    absl::StatusOr<Journal> second = Journal::Open(dir.path(), &second_recovered);
    REQUIRE(absl::IsFailedPrecondition(second.status()));
    CHECK(second.status().message() == "work dir " + dir.path() + " is in use by another dispatcherd (pid " +
                                           std::to_string(::getpid()) + ", holding " + dir.File("LOCK") +
                                           "); give each dispatcher its own --work-dir");
    CHECK(second_recovered.updates.empty());
    CHECK(Files(dir.path()) == files_held);
    // The holder goes on appending.
    REQUIRE(held->Append(WorkerUpdate("w1")).ok());
  }
  // Released with the journal: the next open recovers both updates.
  Journal::Recovered recovered;
  REQUIRE(Journal::Open(dir.path(), &recovered).ok());
  CHECK(Addresses(recovered) == std::vector<std::string>{"w0", "w1"});
}

}  // namespace
}  // namespace sluice::dispatcher
