#include "dispatcher/journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "tests/testing/journal_test_util.h"
#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

constexpr int64_t kMagicBytes = 8;
constexpr int64_t kFramingBytes = 12;  // length, length CRC, payload CRC
constexpr int64_t kSizeRecordBytes = kFramingBytes + 8;

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

// A snapshot of `workers` workers, 31 bytes each; empty for none.
proto::StateSnapshot WorkersSnapshot(int workers) {
  proto::StateSnapshot snapshot;
  for (int i = 0; i < workers; ++i) {
    snapshot.add_workers()->set_address("worker-" + std::to_string(100 + i) + ".example.org:5000");
  }
  return snapshot;
}

// The bytes of a snapshot file holding `payload_bytes` in chunks of at most
// `chunk` bytes.
int64_t SnapshotFileBytes(int64_t payload_bytes, int64_t chunk) {
  return kMagicBytes + kSizeRecordBytes + kFramingBytes * ((payload_bytes + chunk - 1) / chunk) +
         payload_bytes;
}

int64_t FileBytes(const std::string& path) { return static_cast<int64_t>(std::filesystem::file_size(path)); }

mode_t Mode(const std::string& path) {
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

// Sets the process's umask for one test.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }

 private:
  mode_t old_;
};

void PutLittleEndian32(uint32_t value, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// One record, framed as the journal frames it, written independently of it.
std::string Record(const std::string& payload) {
  std::string record;
  PutLittleEndian32(static_cast<uint32_t>(payload.size()), &record);
  PutLittleEndian32(crc32c::Mask(crc32c::Value(record)), &record);
  record += payload;
  PutLittleEndian32(crc32c::Mask(crc32c::Value(payload)), &record);
  return record;
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
  const int64_t chunk = kMagicBytes + kSizeRecordBytes;
  SECTION("in the size record") {
    FlipByte(path, kMagicBytes + 9);
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(absl::IsDataLoss(journal.status()));
    CHECK(journal.status().message() == path + ": byte 8: record checksum mismatch");
  }
  SECTION("in the chunk") {
    FlipByte(path, chunk + 9);
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
    REQUIRE(absl::IsDataLoss(journal.status()));
    CHECK(journal.status().message() ==
          path + ": byte " + std::to_string(chunk) + ": record checksum mismatch");
  }
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

// Issue 32 (13): a torn write leaves the file short; a complete record that
// fails its checksum is damage, and dropping it would hand its ids out again.
TEST_CASE("journal: a bit flipped in the complete last record is an error, not a torn tail", "[journal]") {
  testing::TempDir dir;
  WriteWorkers(dir.path(), 3);
  const std::string path = dir.File("journal-0000000001.log");
  const int64_t last = kMagicBytes + RecordBytes(WorkerUpdate("w0")) + RecordBytes(WorkerUpdate("w1"));
  const int64_t size = FileBytes(path);
  REQUIRE(size == last + RecordBytes(WorkerUpdate("w2")));
  SECTION("in its payload") { FlipByte(path, last + 8 + 1); }
  SECTION("in its payload checksum") { FlipByte(path, size - 1); }
  const std::string expected = path + ": byte " + std::to_string(last) + ": record checksum mismatch";
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
  REQUIRE(absl::IsDataLoss(journal.status()));
  CHECK(journal.status().message() == expected);
  CHECK(recovered.warnings.empty());
  // Nothing was cut: the next start refuses the same way.
  CHECK(FileBytes(path) == size);
  Journal::Recovered again;
  CHECK(Journal::Open(dir.path(), &again).status().message() == expected);
}

TEST_CASE("journal: a last record cut short anywhere is a torn tail, dropped with a warning", "[journal]") {
  testing::TempDir dir;
  WriteWorkers(dir.path(), 3);
  const std::string path = dir.File("journal-0000000001.log");
  const int64_t last = kMagicBytes + RecordBytes(WorkerUpdate("w0")) + RecordBytes(WorkerUpdate("w1"));
  const int64_t payload = static_cast<int64_t>(WorkerUpdate("w2").ByteSizeLong());
  std::string expected;
  SECTION("in its payload checksum") {
    REQUIRE(::truncate(path.c_str(), FileBytes(path) - 1) == 0);
    expected = path + ": torn record at byte " + std::to_string(last) + " (record of " +
               std::to_string(payload) + " bytes cut short at " + std::to_string(payload + 3) +
               "): truncated, " + std::to_string(RecordBytes(WorkerUpdate("w2")) - 1) + " bytes dropped";
  }
  SECTION("in its header") {
    REQUIRE(::truncate(path.c_str(), last + 5) == 0);
    expected = path + ": torn record at byte " + std::to_string(last) +
               " (partial record header): truncated, 5 bytes dropped";
  }
  Journal::Recovered recovered;
  REQUIRE(Journal::Open(dir.path(), &recovered).ok());
  CHECK(Addresses(recovered) == std::vector<std::string>{"w0", "w1"});
  CHECK(recovered.warnings == std::vector<std::string>{expected});
  CHECK(FileBytes(path) == last);
}

// Issue 32 (17): the files hold the definitions, inline data included.
TEST_CASE("journal: journal and snapshot files are 0600 whatever the umask", "[journal]") {
  const mode_t mask = GENERATE(mode_t{022}, mode_t{0});
  ScopedUmask umask(mask);
  testing::TempDir dir;
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
  REQUIRE(journal.ok());
  REQUIRE(journal->Append(WorkerUpdate("w0")).ok());
  CHECK(Mode(dir.File("journal-0000000001.log")) == 0600);
  // A temp file left in the way, readable by all, is emptied and made
  // private before the snapshot goes in.
  const std::string temporary = dir.File("snapshot-0000000002.pb.tmp");
  { std::ofstream(temporary) << "left over"; }
  REQUIRE(::chmod(temporary.c_str(), 0666) == 0);
  REQUIRE(journal->WriteSnapshot(WorkersSnapshot(1)).ok());
  REQUIRE(journal->Append(WorkerUpdate("w1")).ok());
  CHECK(Files(dir.path()) ==
        std::set<std::string>{"LOCK", "snapshot-0000000002.pb", "journal-0000000002.log"});
  CHECK(Mode(dir.File("snapshot-0000000002.pb")) == 0600);
  CHECK(Mode(dir.File("journal-0000000002.log")) == 0600);
}

// Issue 32 (2): a snapshot past one record's bound was written and then not
// read back. The record bound is made small here; production's is 1 GiB.
TEST_CASE("journal: a snapshot larger than one record is written in chunks and read back whole",
          "[journal]") {
  testing::TempDir dir;
  const JournalLimits limits{.max_record_bytes = 64};
  const int workers = GENERATE(0, 1, 10);
  const proto::StateSnapshot snapshot = WorkersSnapshot(workers);
  const int64_t bytes = static_cast<int64_t>(snapshot.ByteSizeLong());
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered, limits);
    REQUIRE(journal.ok());
    REQUIRE(journal->WriteSnapshot(snapshot).ok());
    REQUIRE(journal->Append(WorkerUpdate("after")).ok());
  }
  CHECK(bytes == 31 * workers);
  CHECK(FileBytes(dir.File("snapshot-0000000002.pb")) == SnapshotFileBytes(bytes, 64));
  for (const JournalLimits& reader : {limits, JournalLimits{}}) {
    Journal::Recovered recovered;
    REQUIRE(Journal::Open(dir.path(), &recovered, reader).ok());
    REQUIRE(recovered.snapshot.has_value());
    CHECK(recovered.snapshot->SerializeAsString() == snapshot.SerializeAsString());
    CHECK(Addresses(recovered) == std::vector<std::string>{"after"});
    CHECK(recovered.warnings.empty());
  }
}

TEST_CASE("journal: a damaged chunked snapshot is an error naming file and offset", "[journal]") {
  testing::TempDir dir;
  const JournalLimits limits{.max_record_bytes = 64};
  const proto::StateSnapshot snapshot = WorkersSnapshot(10);
  const int64_t bytes = static_cast<int64_t>(snapshot.ByteSizeLong());
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered, limits);
    REQUIRE(journal.ok());
    REQUIRE(journal->WriteSnapshot(snapshot).ok());
  }
  const std::string path = dir.File("snapshot-0000000002.pb");
  const int64_t second_chunk = kMagicBytes + kSizeRecordBytes + kFramingBytes + 64;
  const int64_t third_chunk = second_chunk + kFramingBytes + 64;
  std::string expected;
  SECTION("a flipped bit in a chunk") {
    FlipByte(path, second_chunk + 8 + 10);
    expected = path + ": byte " + std::to_string(second_chunk) + ": record checksum mismatch";
  }
  SECTION("cut at a chunk's end") {
    REQUIRE(::truncate(path.c_str(), third_chunk) == 0);
    expected = path + ": byte " + std::to_string(third_chunk) + ": snapshot ends after 128 of its " +
               std::to_string(bytes) + " bytes";
  }
  SECTION("cut inside a chunk") {
    REQUIRE(::truncate(path.c_str(), third_chunk + 20) == 0);
    expected = path + ": byte " + std::to_string(third_chunk) + ": record of 64 bytes cut short at 12";
  }
  SECTION("bytes after the last chunk") {
    { std::ofstream(path, std::ios::app | std::ios::binary) << std::string(3, '\0'); }
    expected = path + ": byte " + std::to_string(SnapshotFileBytes(bytes, 64)) +
               ": unexpected bytes after the snapshot";
  }
  JournalLimits reader = limits;
  SECTION("read with a smaller record bound than it was written with") {
    reader.max_record_bytes = 32;
    expected =
        path + ": byte " + std::to_string(kMagicBytes + kSizeRecordBytes) + ": record length 64 is too large";
  }
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered, reader);
  REQUIRE(absl::IsDataLoss(journal.status()));
  CHECK(journal.status().message() == expected);
}

TEST_CASE("journal: a snapshot whose size record is damaged is an error naming it", "[journal]") {
  testing::TempDir dir;
  const std::string path = dir.File("snapshot-0000000002.pb");
  auto size_record = [](uint32_t size) {
    std::string bytes;
    PutLittleEndian32(size, &bytes);
    return Record(bytes + std::string(4, '\0'));
  };
  std::string contents;
  std::string expected;
  SECTION("a size past the bound") {
    contents = "SLUSNAP2" + size_record(101);
    expected = path + ": byte 8: snapshot size 101 is too large";
  }
  SECTION("a size record of the wrong length") {
    contents = "SLUSNAP2" + Record("1234");
    expected = path + ": byte 8: size record of 4 bytes, not 8";
  }
  SECTION("a chunk longer than the size left") {
    contents = "SLUSNAP2" + size_record(10) + Record(std::string(6, 'x')) + Record(std::string(6, 'y'));
    expected = path + ": byte 46: chunk of 6 bytes runs past the snapshot's 10 bytes";
  }
  SECTION("chunks that do not parse") {
    contents = "SLUSNAP2" + size_record(3) + Record(std::string(3, '\xff'));
    expected = path + ": byte 28: snapshot does not parse";
  }
  SECTION("no size record") {
    contents = "SLUSNAP2";
    expected = path + ": byte 8: no snapshot record";
  }
  SECTION("a bad magic") {
    contents = "SLUSNAP9" + size_record(0);
    expected = path + ": byte 0: not a Sluice snapshot (bad magic)";
  }
  { std::ofstream(path, std::ios::binary) << contents; }
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal =
      Journal::Open(dir.path(), &recovered, JournalLimits{.max_record_bytes = 64, .max_snapshot_bytes = 100});
  REQUIRE(absl::IsDataLoss(journal.status()));
  CHECK(journal.status().message() == expected);
}

TEST_CASE("journal: a snapshot larger than recovery reads is refused, and the old state recovers",
          "[journal]") {
  testing::TempDir dir;
  const JournalLimits limits{.max_record_bytes = 64, .max_snapshot_bytes = 100};
  const proto::StateSnapshot too_large = WorkersSnapshot(10);
  REQUIRE(too_large.ByteSizeLong() > 100);
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered, limits);
    REQUIRE(journal.ok());
    REQUIRE(journal->Append(WorkerUpdate("before")).ok());
    proto::StateSnapshot old;
    old.set_next_job_id(7);
    REQUIRE(journal->WriteSnapshot(old).ok());
    REQUIRE(journal->Append(WorkerUpdate("after")).ok());
    const std::set<std::string> files = Files(dir.path());
    const int64_t journal_bytes = FileBytes(dir.File("journal-0000000002.log"));

    const absl::Status refused = journal->WriteSnapshot(too_large);
    REQUIRE(absl::IsResourceExhausted(refused));
    CHECK(refused.message() == "journal " + dir.path() + ": a snapshot of " +
                                   std::to_string(too_large.ByteSizeLong()) +
                                   " bytes is larger than the 100 bytes recovery reads; not written, the "
                                   "previous snapshot and the journal since stay in use");
    CHECK(Files(dir.path()) == files);
    CHECK(FileBytes(dir.File("journal-0000000002.log")) == journal_bytes);
    CHECK(journal->records_since_snapshot() == 1);
    // Appends go on into the same file.
    REQUIRE(journal->Append(WorkerUpdate("later")).ok());
  }
  Journal::Recovered recovered;
  REQUIRE(Journal::Open(dir.path(), &recovered, limits).ok());
  REQUIRE(recovered.snapshot.has_value());
  CHECK(recovered.snapshot->next_job_id() == 7);
  CHECK(Addresses(recovered) == std::vector<std::string>{"after", "later"});
  CHECK(recovered.warnings.empty());
}

TEST_CASE("journal: an update larger than a record may hold is refused and nothing is written", "[journal]") {
  testing::TempDir dir;
  const JournalLimits limits{.max_record_bytes = 64};
  // The largest update accepted is exactly the largest recovery reads.
  const proto::Update largest = WorkerUpdate(std::string(60, 'a'));
  REQUIRE(largest.ByteSizeLong() == 64);
  const proto::Update too_large = WorkerUpdate(std::string(61, 'b'));
  const std::string path = dir.File("journal-0000000001.log");
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered, limits);
    REQUIRE(journal.ok());
    REQUIRE(journal->Append(largest).ok());
    const int64_t size = FileBytes(path);
    const absl::Status refused = journal->Append(too_large);
    REQUIRE(absl::IsResourceExhausted(refused));
    CHECK(refused.message() ==
          "journal " + path +
              ": an update of 65 bytes is larger than the 64 bytes a record may hold; not written");
    CHECK(FileBytes(path) == size);
    CHECK(journal->records_since_snapshot() == 1);
    REQUIRE(journal->Append(WorkerUpdate("w1")).ok());
  }
  Journal::Recovered recovered;
  REQUIRE(Journal::Open(dir.path(), &recovered, limits).ok());
  CHECK(Addresses(recovered) == std::vector<std::string>{std::string(60, 'a'), "w1"});
  CHECK(recovered.warnings.empty());
}

TEST_CASE("journal: limits recovery could not honour are refused before the dir is touched", "[journal]") {
  testing::TempDir dir;
  const int64_t int32_max = std::numeric_limits<int32_t>::max();
  auto [limits, expected] = GENERATE_COPY(table<JournalLimits, std::string>({
      {JournalLimits{.max_record_bytes = 7}, "records of 7 bytes, snapshots of " + std::to_string(int32_max)},
      {JournalLimits{.max_record_bytes = (1u << 30) + 1},
       "records of 1073741825 bytes, snapshots of " + std::to_string(int32_max)},
      {JournalLimits{.max_snapshot_bytes = int32_max + 1},
       "records of 1073741824 bytes, snapshots of " + std::to_string(int32_max + 1)},
      {JournalLimits{.max_snapshot_bytes = -1}, "records of 1073741824 bytes, snapshots of -1"},
  }));
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.File("work"), &recovered, limits);
  REQUIRE(absl::IsInvalidArgument(journal.status()));
  CHECK(journal.status().message() == "journal limits out of range: " + expected + " bytes");
  CHECK_FALSE(std::filesystem::exists(dir.File("work")));
}

TEST_CASE("journal: a snapshot in the single-record format of before is still read", "[journal]") {
  testing::TempDir dir;
  const proto::StateSnapshot snapshot = WorkersSnapshot(3);
  {
    std::ofstream(dir.File("snapshot-0000000005.pb"), std::ios::binary)
        << "SLUSNAP1" << Record(snapshot.SerializeAsString());
  }
  Journal::Recovered recovered;
  absl::StatusOr<Journal> journal = Journal::Open(dir.path(), &recovered);
  REQUIRE(journal.ok());
  REQUIRE(recovered.snapshot.has_value());
  CHECK(recovered.snapshot->SerializeAsString() == snapshot.SerializeAsString());
  CHECK(Files(dir.path()) ==
        std::set<std::string>{"LOCK", "snapshot-0000000005.pb", "journal-0000000006.log"});
}

}  // namespace
}  // namespace sluice::dispatcher
