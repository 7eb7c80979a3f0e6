#include "dispatcher/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crc32c.h"
#include "common/file_io.h"
#include "service/metrics.h"

namespace sluice::dispatcher {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kJournalMagic = "SLUJRNL1";
// One record after the magic, which bounded a snapshot to 1 GiB; still read,
// never written.
constexpr std::string_view kSnapshotMagicV1 = "SLUSNAP1";
// A size record (8 bytes, little-endian), then chunk records holding that
// many bytes of StateSnapshot.
constexpr std::string_view kSnapshotMagic = "SLUSNAP2";
constexpr size_t kHeaderBytes = 8;   // length, length CRC
constexpr size_t kTrailerBytes = 4;  // payload CRC
constexpr size_t kSizeRecordPayload = 8;
// The defaults are also the most a JournalLimits may allow.
constexpr JournalLimits kMostLimits;
// The files hold the datasets' definitions, inline data included.
constexpr mode_t kFileMode = 0600;

std::string Errno(const std::string& what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

std::string FileName(std::string_view prefix, int64_t sequence, std::string_view suffix) {
  return absl::StrFormat("%s-%010d%s", prefix, sequence, suffix);
}

// A snapshot of `size` bytes is refused past what recovery reads.
absl::Status CheckSnapshotSize(const std::string& dir, size_t size, const JournalLimits& limits) {
  if (size <= static_cast<uint64_t>(limits.max_snapshot_bytes)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "journal ", dir, ": a snapshot of ", size, " bytes is larger than the ", limits.max_snapshot_bytes,
      " bytes recovery reads; not written, the previous snapshot and the journal since stay in use"));
}

// The sequence number of "PREFIX-N.SUFFIX", or nullopt for other names.
std::optional<int64_t> SequenceOf(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + 1 + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix) || name[prefix.size()] != '-') {
    return std::nullopt;
  }
  const std::string digits = name.substr(prefix.size() + 1, name.size() - prefix.size() - 1 - suffix.size());
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  return std::stoll(digits);
}

void PutLittleEndian32(uint32_t value, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void PutLittleEndian64(uint64_t value, std::string* out) {
  PutLittleEndian32(static_cast<uint32_t>(value), out);
  PutLittleEndian32(static_cast<uint32_t>(value >> 32), out);
}

uint32_t GetLittleEndian32(const char* p) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return value;
}

uint64_t GetLittleEndian64(const char* p) {
  return uint64_t{GetLittleEndian32(p)} | (uint64_t{GetLittleEndian32(p + 4)} << 32);
}

std::string RecordHeader(std::string_view payload) {
  std::string header;
  PutLittleEndian32(static_cast<uint32_t>(payload.size()), &header);
  PutLittleEndian32(crc32c::Mask(crc32c::Value(header)), &header);
  return header;
}

std::string RecordTrailer(std::string_view payload) {
  std::string trailer;
  PutLittleEndian32(crc32c::Mask(crc32c::Value(payload)), &trailer);
  return trailer;
}

std::string EncodeRecord(std::string_view payload) {
  std::string record = RecordHeader(payload);
  record.reserve(kHeaderBytes + payload.size() + kTrailerBytes);
  record += payload;
  record += RecordTrailer(payload);
  return record;
}

enum class ReadResult { kRecord, kEnd, kTorn, kCorrupt };

// Reads the record at *offset; *payload points into `data`. kTorn is damage
// that only a write cut short at the end of the file explains; kCorrupt is
// any other. A record whose length fits in the file but whose payload
// checksum does not match is kCorrupt even when it is the last: a crash
// leaves a file short, and a flipped bit read as a crash would drop an
// acknowledged update and let its ids be handed out again.
ReadResult ReadRecord(const std::string& data, uint32_t max_record_bytes, size_t* offset,
                      std::string_view* payload, std::string* why) {
  const size_t remaining = data.size() - *offset;
  if (remaining == 0) return ReadResult::kEnd;
  const char* p = data.data() + *offset;
  if (remaining < kHeaderBytes) {
    *why = "partial record header";
    return ReadResult::kTorn;
  }
  const uint32_t length = GetLittleEndian32(p);
  if (crc32c::Unmask(GetLittleEndian32(p + 4)) != crc32c::Value(std::string_view(p, 4))) {
    // A file system may leave zeros where a write was lost.
    if (std::all_of(p, p + remaining, [](char c) { return c == 0; })) {
      *why = "zeroed record";
      return ReadResult::kTorn;
    }
    *why = "record length checksum mismatch";
    return ReadResult::kCorrupt;
  }
  if (length > max_record_bytes) {
    *why = absl::StrCat("record length ", length, " is too large");
    return ReadResult::kCorrupt;
  }
  const size_t total = kHeaderBytes + length + kTrailerBytes;
  if (remaining < total) {
    *why = absl::StrCat("record of ", length, " bytes cut short at ", remaining - kHeaderBytes);
    return ReadResult::kTorn;
  }
  const std::string_view body(p + kHeaderBytes, length);
  if (crc32c::Unmask(GetLittleEndian32(p + kHeaderBytes + length)) != crc32c::Value(body)) {
    *why = "record checksum mismatch";
    return ReadResult::kCorrupt;
  }
  *payload = body;
  *offset += total;
  return ReadResult::kRecord;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(Errno("cannot open", path));
  std::string contents;
  const int error = ReadToEnd(fd, SIZE_MAX, &contents);
  ::close(fd);
  if (error != 0) {
    errno = error;
    return absl::DataLossError(Errno("cannot read", path));
  }
  return contents;
}

// Creates (or empties) PATH for writing, 0600 whatever the umask, and
// whatever mode a file already there had.
absl::StatusOr<int> CreatePrivateFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
  if (fd < 0) return absl::InternalError(Errno("cannot create", path));
  if (::fchmod(fd, kFileMode) != 0) {
    const absl::Status status = absl::InternalError(Errno("cannot chmod", path));
    ::close(fd);
    return status;
  }
  return fd;
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  if (const int error = WriteFully(fd, bytes); error != 0) {
    errno = error;
    return absl::InternalError(Errno("cannot write", path));
  }
  return absl::OkStatus();
}

// Writes one record without copying its payload, for snapshot chunks.
absl::Status WriteRecord(int fd, std::string_view payload, const std::string& path) {
  if (absl::Status s = WriteAll(fd, RecordHeader(payload), path); !s.ok()) return s;
  if (absl::Status s = WriteAll(fd, payload, path); !s.ok()) return s;
  return WriteAll(fd, RecordTrailer(payload), path);
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return absl::InternalError(Errno("cannot open", dir));
  const int result = ::fsync(fd);
  ::close(fd);
  if (result != 0) return absl::InternalError(Errno("cannot sync", dir));
  return absl::OkStatus();
}

absl::Status ReadSnapshot(const std::string& path, const JournalLimits& limits,
                          proto::StateSnapshot* snapshot) {
  absl::StatusOr<std::string> data = ReadWholeFile(path);
  if (!data.ok()) return data.status();
  // Snapshots appear by rename once complete: any damage is corruption.
  auto damaged = [&](size_t offset, const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": byte ", offset, ": ", why));
  };
  auto read = [&](size_t* offset, std::string_view* payload) -> absl::Status {
    const size_t start = *offset;
    std::string why;
    if (ReadRecord(*data, limits.max_record_bytes, offset, payload, &why) == ReadResult::kRecord) {
      return absl::OkStatus();
    }
    return damaged(start, why.empty() ? "no snapshot record" : why);
  };
  size_t offset = kSnapshotMagic.size();
  std::string_view payload;
  if (data->starts_with(kSnapshotMagicV1)) {
    if (absl::Status s = read(&offset, &payload); !s.ok()) return s;
    if (offset != data->size()) return damaged(offset, "unexpected bytes after the snapshot");
    if (!snapshot->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      return damaged(kSnapshotMagic.size(), "snapshot record does not parse");
    }
    return absl::OkStatus();
  }
  if (!data->starts_with(kSnapshotMagic)) return damaged(0, "not a Sluice snapshot (bad magic)");
  if (absl::Status s = read(&offset, &payload); !s.ok()) return s;
  if (payload.size() != kSizeRecordPayload) {
    return damaged(kSnapshotMagic.size(), absl::StrCat("size record of ", payload.size(), " bytes, not 8"));
  }
  const uint64_t size = GetLittleEndian64(payload.data());
  if (size > static_cast<uint64_t>(limits.max_snapshot_bytes)) {
    return damaged(kSnapshotMagic.size(), absl::StrCat("snapshot size ", size, " is too large"));
  }
  // The chunks are moved together in place: a second copy of a large
  // snapshot could exhaust memory. They move backwards over bytes already
  // read, so the reads ahead see the file as it was.
  const size_t first_chunk = offset;
  size_t filled = 0;
  while (filled < size) {
    const size_t start = offset;
    if (offset == data->size()) {
      return damaged(start, absl::StrCat("snapshot ends after ", filled, " of its ", size, " bytes"));
    }
    if (absl::Status s = read(&offset, &payload); !s.ok()) return s;
    if (payload.size() > size - filled) {
      return damaged(start, absl::StrCat("chunk of ", payload.size(), " bytes runs past the snapshot's ",
                                         size, " bytes"));
    }
    std::memmove(data->data() + filled, payload.data(), payload.size());
    filled += payload.size();
  }
  if (offset != data->size()) return damaged(offset, "unexpected bytes after the snapshot");
  if (!snapshot->ParseFromArray(data->data(), static_cast<int>(size))) {
    return damaged(first_chunk, "snapshot does not parse");
  }
  return absl::OkStatus();
}

// Reads one journal file's updates. Only in the last file may a torn tail
// be cut off.
absl::Status ReadJournalFile(const std::string& path, bool last, const JournalLimits& limits,
                             Journal::Recovered* recovered) {
  absl::StatusOr<std::string> data = ReadWholeFile(path);
  if (!data.ok()) return data.status();
  auto torn = [&](size_t offset, const std::string& why) -> absl::Status {
    if (!last) {
      return absl::DataLossError(
          absl::StrCat(path, ": byte ", offset, ": ", why, " in a journal file that is not the newest"));
    }
    if (::truncate(path.c_str(), static_cast<off_t>(offset)) != 0) {
      return absl::InternalError(Errno("cannot truncate", path));
    }
    recovered->warnings.push_back(absl::StrCat(path, ": torn record at byte ", offset, " (", why,
                                               "): truncated, ", data->size() - offset, " bytes dropped"));
    return absl::OkStatus();
  };
  if (data->size() < kJournalMagic.size()) {
    if (kJournalMagic.starts_with(*data)) return torn(0, "partial file header");
    return absl::DataLossError(absl::StrCat(path, ": byte 0: not a Sluice journal (bad magic)"));
  }
  if (!data->starts_with(kJournalMagic)) {
    return absl::DataLossError(absl::StrCat(path, ": byte 0: not a Sluice journal (bad magic)"));
  }
  size_t offset = kJournalMagic.size();
  while (true) {
    const size_t start = offset;
    std::string_view payload;
    std::string why;
    switch (ReadRecord(*data, limits.max_record_bytes, &offset, &payload, &why)) {
      case ReadResult::kEnd:
        return absl::OkStatus();
      case ReadResult::kTorn:
        return torn(start, why);
      case ReadResult::kCorrupt:
        return absl::DataLossError(absl::StrCat(path, ": byte ", start, ": ", why));
      case ReadResult::kRecord: {
        Journal::Recovered::Record record;
        if (!record.update.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return absl::DataLossError(
              absl::StrCat(path, ": byte ", start, ": record does not parse as an update"));
        }
        record.file = path;
        record.offset = static_cast<int64_t>(start);
        recovered->updates.push_back(std::move(record));
        break;
      }
    }
  }
}

}  // namespace

namespace {

// Takes DIR/LOCK for this process and writes its pid there; the lock goes
// with the process, so a dispatcher killed with -9 leaves none behind.
absl::StatusOr<int> LockWorkDir(const std::string& dir) {
  const std::string path = (fs::path(dir) / "LOCK").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InvalidArgumentError(Errno("work dir: cannot open", path));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int lock_errno = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
    ::close(fd);
    if (lock_errno != EWOULDBLOCK) {
      errno = lock_errno;
      return absl::InternalError(Errno("work dir: cannot lock", path));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "work dir ", dir, " is in use by another dispatcherd (pid ",
        n > 0 ? std::string(absl::StripAsciiWhitespace(absl::string_view(pid, static_cast<size_t>(n))))
              : "unknown",
        ", holding ", path, "); give each dispatcher its own --work-dir"));
  }
  const std::string own = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, own.data(), own.size(), 0) != static_cast<ssize_t>(own.size())) {
    ::close(fd);
    return absl::InternalError(Errno("work dir: cannot write", path));
  }
  return fd;
}

}  // namespace

absl::StatusOr<Journal> Journal::Open(const std::string& dir, Recovered* recovered,
                                      const JournalLimits& limits) {
  if (limits.max_record_bytes < kSizeRecordPayload ||
      limits.max_record_bytes > kMostLimits.max_record_bytes || limits.max_snapshot_bytes < 0 ||
      limits.max_snapshot_bytes > kMostLimits.max_snapshot_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("journal limits out of range: records of ",
                                                   limits.max_record_bytes, " bytes, snapshots of ",
                                                   limits.max_snapshot_bytes, " bytes"));
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return absl::InvalidArgumentError(absl::StrCat("work dir ", dir, ": ", error.message()));
  absl::StatusOr<int> lock_fd = LockWorkDir(dir);
  if (!lock_fd.ok()) return lock_fd.status();
  std::map<int64_t, std::string> journals;
  std::map<int64_t, std::string> snapshots;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (auto seq = SequenceOf(name, "journal", ".log")) journals[*seq] = entry.path().string();
    if (auto seq = SequenceOf(name, "snapshot", ".pb")) snapshots[*seq] = entry.path().string();
    // A snapshot whose writer died before renaming it.
    if (name.starts_with("snapshot-") && name.ends_with(".tmp")) fs::remove(entry.path(), error);
  }
  if (error) return absl::InvalidArgumentError(absl::StrCat("work dir ", dir, ": ", error.message()));

  Journal journal(dir, limits);
  journal.lock_fd_ = *lock_fd;
  int64_t first_journal = 0;
  if (!snapshots.empty()) {
    const auto& [seq, path] = *snapshots.rbegin();
    recovered->snapshot.emplace();
    if (absl::Status s = ReadSnapshot(path, limits, &*recovered->snapshot); !s.ok()) return s;
    first_journal = seq;
    journal.sequence_ = seq;
  }
  for (auto it = journals.lower_bound(first_journal); it != journals.end(); ++it) {
    const bool last = std::next(it) == journals.end();
    if (absl::Status s = ReadJournalFile(it->second, last, limits, recovered); !s.ok()) return s;
    journal.sequence_ = std::max(journal.sequence_, it->first);
  }
  // Files a snapshot replaced, left by a crash before they were deleted.
  for (const auto& [seq, path] : journals) {
    if (seq < first_journal) fs::remove(path, error);
  }
  for (const auto& [seq, path] : snapshots) {
    if (seq < first_journal) fs::remove(path, error);
  }
  journal.records_since_snapshot_ = static_cast<int64_t>(recovered->updates.size());
  // Appends go to a new file, so that a file once read is never changed.
  if (absl::Status s = journal.StartFile(journal.sequence_ + 1); !s.ok()) return s;
  return journal;
}

Journal::Journal(Journal&& other) noexcept
    : dir_(std::move(other.dir_)),
      limits_(other.limits_),
      lock_fd_(std::exchange(other.lock_fd_, -1)),
      file_(std::move(other.file_)),
      sync_(std::move(other.sync_)),
      sequence_(other.sequence_),
      records_since_snapshot_(other.records_since_snapshot_),
      bytes_since_snapshot_(other.bytes_since_snapshot_) {}

Journal& Journal::operator=(Journal&& other) noexcept {
  if (this != &other) {
    Close();
    dir_ = std::move(other.dir_);
    limits_ = other.limits_;
    lock_fd_ = std::exchange(other.lock_fd_, -1);
    file_ = std::move(other.file_);
    sync_ = std::move(other.sync_);
    sequence_ = other.sequence_;
    records_since_snapshot_ = other.records_since_snapshot_;
    bytes_since_snapshot_ = other.bytes_since_snapshot_;
  }
  return *this;
}

Journal::~Journal() { Close(); }

void Journal::Close() {
  // What was written is synced before the work dir is let go: an orderly
  // exit loses nothing that requests still waiting would have synced.
  if (sync_ != nullptr && sync_->unsynced() > 0) (void)sync_->SyncWritten();
  file_.reset();
  sync_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

absl::Status Journal::StartFile(int64_t sequence) {
  const std::string path = (fs::path(dir_) / FileName("journal", sequence, ".log")).string();
  absl::StatusOr<int> created = CreatePrivateFile(path);
  if (!created.ok()) return created.status();
  const int fd = *created;
  if (absl::Status s = WriteAll(fd, kJournalMagic, path); !s.ok()) {
    ::close(fd);
    return s;
  }
  if (::fdatasync(fd) != 0) {
    ::close(fd);
    return absl::InternalError(Errno("cannot sync", path));
  }
  if (absl::Status s = SyncDirectory(dir_); !s.ok()) {
    ::close(fd);
    return s;
  }
  file_ = std::make_shared<JournalFile>(fd, path);
  sync_->SetFile(file_);
  sequence_ = sequence;
  return absl::OkStatus();
}

absl::Status Journal::Write(const proto::Update& update) {
  const std::string& path = file_->path();
  // Refused before writing, so the journal stays whole: recovery would stop
  // at a record longer than it reads.
  const size_t size = update.ByteSizeLong();
  if (size > limits_.max_record_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("journal ", path, ": an update of ", size,
                                                     " bytes is larger than the ", limits_.max_record_bytes,
                                                     " bytes a record may hold; not written"));
  }
  const std::string record = EncodeRecord(update.SerializeAsString());
  static Counter& bytes_written =
      ProcessMetrics()
          .AddCounter("sluice_journal_bytes_written_total", "bytes appended to the journal")
          .Get();
  if (absl::Status s = WriteAll(file_->fd(), record, path); !s.ok()) return s;
  sync_->Written();
  bytes_written.Increment(static_cast<double>(record.size()));
  ++records_since_snapshot_;
  bytes_since_snapshot_ += static_cast<int64_t>(record.size());
  return absl::OkStatus();
}

absl::Status Journal::Append(const proto::Update& update) {
  if (absl::Status s = Write(update); !s.ok()) return s;
  return sync_->SyncWritten();
}

absl::Status Journal::WriteSnapshot(const proto::StateSnapshot& snapshot) {
  // Checked before the journal moves to a new file, so that a refused
  // snapshot leaves the files as they were.
  if (absl::Status s = CheckSnapshotSize(dir_, snapshot.ByteSizeLong(), limits_); !s.ok()) return s;
  absl::StatusOr<int64_t> sequence = BeginSnapshot();
  if (!sequence.ok()) return sequence.status();
  return WriteSnapshotFile(dir_, *sequence, snapshot, limits_);
}

absl::StatusOr<int64_t> Journal::BeginSnapshot() {
  // Every record of this file on disk before the next is started: only the
  // last journal file may end in a torn record (Open).
  if (absl::Status s = sync_->SyncWritten(); !s.ok()) return s;
  const int64_t sequence = sequence_ + 1;
  if (absl::Status s = StartFile(sequence); !s.ok()) return s;
  records_since_snapshot_ = 0;
  bytes_since_snapshot_ = 0;
  return sequence;
}

absl::Status Journal::WriteSnapshotFile(const std::string& dir, int64_t sequence,
                                        const proto::StateSnapshot& snapshot, const JournalLimits& limits) {
  const std::string path = (fs::path(dir) / FileName("snapshot", sequence, ".pb")).string();
  const std::string temporary = path + ".tmp";
  // Chunked rather than refused at one record's bound, so that any state
  // the dispatcher can hold in one proto is written in a form recovery
  // reads back; past the proto bound nothing can be, and the old snapshot
  // and the journal since stay the record.
  if (absl::Status s = CheckSnapshotSize(dir, snapshot.ByteSizeLong(), limits); !s.ok()) return s;
  std::string payload;
  if (!snapshot.SerializeToString(&payload)) {
    return absl::InternalError(absl::StrCat("cannot serialize the snapshot for ", path));
  }
  absl::StatusOr<int> created = CreatePrivateFile(temporary);
  if (!created.ok()) return created.status();
  const int fd = *created;
  std::string size_bytes;
  PutLittleEndian64(payload.size(), &size_bytes);
  absl::Status status = WriteAll(fd, std::string(kSnapshotMagic) + EncodeRecord(size_bytes), temporary);
  for (size_t done = 0; status.ok() && done < payload.size(); done += limits.max_record_bytes) {
    status = WriteRecord(fd, std::string_view(payload).substr(done, limits.max_record_bytes), temporary);
  }
  if (status.ok() && ::fdatasync(fd) != 0) status = absl::InternalError(Errno("cannot sync", temporary));
  ::close(fd);
  if (status.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(Errno("cannot rename to", path));
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());
    return status;
  }
  if (absl::Status s = SyncDirectory(dir); !s.ok()) return s;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    auto journal = SequenceOf(name, "journal", ".log");
    auto old_snapshot = SequenceOf(name, "snapshot", ".pb");
    if ((journal && *journal < sequence) || (old_snapshot && *old_snapshot < sequence)) {
      fs::remove(entry.path(), error);
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
