// The cache op's files: the lock, the temp file a pass writes, and the
// complete cache's data and index (cache_files.h describes the layout).
#include "pipeline/cache_files.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/file_io.h"
#include "common/proto_convert.h"
#include "common/strings.h"
#include "pipeline/iterator_state.h"

namespace sluice {
namespace {

// A TFRecord's framing around its data: length, its CRC, the data's CRC.
constexpr int64_t kRecordOverhead = 16;
constexpr char kIndexVersion[] = "sluice-cache 2";
// Indexes of the first release name no pipeline.
constexpr char kUnfingerprintedVersion[] = "sluice-cache 1";
// Lock and index files are one short line.
constexpr size_t kMaxSmallFile = 4096;

std::string DataPath(const std::string& filename) { return filename + ".data"; }
std::string IndexPath(const std::string& filename) { return filename + ".index"; }
std::string LockPath(const std::string& filename) { return filename + ".lockfile"; }
// Derived from the writer id, never taken from a checkpoint as is: a
// restore cannot make a worker read or delete a file of its choosing.
std::string TempPath(const std::string& filename, const std::string& writer_id) {
  return absl::StrCat(filename, ".data.", writer_id, ".tmp");
}

std::string HostName() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
}

std::string NewWriterId() {
  std::random_device device;
  const uint64_t id = (uint64_t{device()} << 32) ^ device() ^ static_cast<uint64_t>(getpid());
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(id));
  return hex;
}

bool IsWriterId(const std::string& id) {
  if (id.size() != 16) return false;
  for (char c : id) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string LockContents(const std::string& writer_id) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char time[32];
  std::strftime(time, sizeof(time), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return absl::StrCat("pid=", getpid(), " host=", HostName(), " writer=", writer_id, " time=", time, "\n");
}

// A file's contents, or nullopt when it does not exist.
absl::StatusOr<std::optional<std::string>> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return absl::PermissionDeniedError(
        absl::StrCat("cache: cannot open '", path, "': ", std::strerror(errno)));
  }
  std::string contents;
  const int error = ReadToEnd(fd, kMaxSmallFile, &contents);
  close(fd);
  if (error != 0 && error != EFBIG) {
    return absl::DataLossError(absl::StrCat("cache: cannot read '", path, "': ", std::strerror(error)));
  }
  return contents;
}

// What a lock file says; fields it lacks stay empty.
struct LockInfo {
  std::string text;  // as written, without the line's end
  int64_t pid = 0;
  std::string host;
  std::string writer;
};

LockInfo ParseLock(const std::string& contents) {
  LockInfo lock{.text = std::string(absl::StripTrailingAsciiWhitespace(contents))};
  for (absl::string_view field : absl::StrSplit(lock.text, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    if (kv.first == "pid") (void)absl::SimpleAtoi(kv.second, &lock.pid);
    if (kv.first == "host") lock.host = kv.second;
    if (kv.first == "writer") lock.writer = kv.second;
  }
  return lock;
}

absl::StatusOr<std::optional<LockInfo>> ReadLock(const std::string& filename) {
  absl::StatusOr<std::optional<std::string>> contents = ReadSmallFile(LockPath(filename));
  if (!contents.ok()) return contents.status();
  if (!contents->has_value()) return std::nullopt;
  return ParseLock(**contents);
}

// A lock of a process on this host that no longer runs. A lock of another
// host (a shared file system) is never judged stale: that process may live.
bool IsStale(const LockInfo& lock) {
  return lock.pid > 0 && lock.host == HostName() && kill(static_cast<pid_t>(lock.pid), 0) != 0 &&
         errno == ESRCH;
}

absl::Status LockHeld(const std::string& filename, const LockInfo& lock) {
  return absl::FailedPreconditionError(absl::StrCat("cache: another iterator is writing the cache '",
                                                    filename, "' (its lock file '", LockPath(filename),
                                                    "': ", lock.text, "); if none is, delete the lock file"));
}

// Creates the lock with O_EXCL: false when one exists.
absl::StatusOr<bool> CreateLock(const std::string& filename, const std::string& writer_id) {
  const std::string path = LockPath(filename);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    return absl::PermissionDeniedError(
        absl::StrCat("cache: cannot create the lock file '", path, "': ", std::strerror(errno)));
  }
  const int error = WriteFully(fd, LockContents(writer_id));
  close(fd);
  if (error != 0) {
    unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat("cache: cannot write '", path, "': ", std::strerror(error)));
  }
  return true;
}

// Puts this writer's lock in place of `old` (stale, or a saved writer's);
// false when another writer took it meanwhile.
absl::StatusOr<bool> ReplaceLock(const std::string& filename, const std::string& writer_id) {
  if (absl::Status s = WriteFileAtomically(LockPath(filename), LockContents(writer_id)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cache: ", s.message()));
  }
  absl::StatusOr<std::optional<LockInfo>> now = ReadLock(filename);
  if (!now.ok()) return now.status();
  return now->has_value() && (*now)->writer == writer_id;
}

bool LockIsOurs(const std::string& filename, const std::string& writer_id) {
  absl::StatusOr<std::optional<LockInfo>> lock = ReadLock(filename);
  return lock.ok() && lock->has_value() && (*lock)->writer == writer_id;
}

absl::Status SyncFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cache: cannot fsync '", path, "': ", std::strerror(error)));
  }
  close(fd);
  return absl::OkStatus();
}

absl::Status Prefixed(const absl::Status& status) {
  if (status.ok() || absl::StartsWith(status.message(), "cache: ")) return status;
  return absl::Status(status.code(), absl::StrCat("cache: ", status.message()));
}

absl::Status Damaged(const std::string& filename, const std::string& what) {
  return absl::DataLossError(absl::StrCat("cache: ", what, ": the cache '", filename,
                                          "' is damaged; delete its files (", filename,
                                          ".*) and a later pass writes it again"));
}

}  // namespace

bool CacheFilesComplete(const std::string& filename) {
  std::error_code error;
  return std::filesystem::exists(IndexPath(filename), error);
}

absl::StatusOr<std::unique_ptr<CacheFileReader>> CacheFileReader::Open(const std::string& filename,
                                                                       const std::string& fingerprint) {
  const std::string index_path = IndexPath(filename);
  const std::string data_path = DataPath(filename);
  absl::StatusOr<std::optional<std::string>> index = ReadSmallFile(index_path);
  if (!index.ok()) return index.status();
  if (!index->has_value()) {
    return absl::NotFoundError(absl::StrCat("cache: '", filename, "' has no index '", index_path, "'"));
  }
  const std::string line(absl::StripTrailingAsciiWhitespace(**index));
  std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
  const bool unfingerprinted =
      fields.size() == 4 && absl::StrCat(fields[0], " ", fields[1]) == kUnfingerprintedVersion;
  int64_t elements = -1;
  int64_t data_bytes = -1;
  absl::string_view written_by;
  if (!(unfingerprinted || (fields.size() == 5 && absl::StrCat(fields[0], " ", fields[1]) == kIndexVersion &&
                            absl::ConsumePrefix(&fields[4], "fingerprint=") && !fields[4].empty())) ||
      !absl::ConsumePrefix(&fields[2], "elements=") || !absl::SimpleAtoi(fields[2], &elements) ||
      !absl::ConsumePrefix(&fields[3], "data_bytes=") || !absl::SimpleAtoi(fields[3], &data_bytes) ||
      elements < 0 || data_bytes < elements * kRecordOverhead) {
    return Damaged(filename, absl::StrCat("the index '", index_path, "' does not parse ('",
                                          EscapeControlCharacters(line.substr(0, 100)), "')"));
  }
  if (!unfingerprinted) written_by = fields[4];
  // A cache holds the elements of the steps before it: another pipeline's
  // (another tenant's, or this one's changed) is never read as this one's.
  if (written_by != fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cache: '", filename, "' holds the elements of another pipeline (",
        unfingerprinted
            ? "written without a fingerprint, by an earlier release"
            : absl::StrCat("fingerprint ", EscapeControlCharacters(std::string(written_by.substr(0, 64)))),
        "; the steps before this cache have fingerprint ", fingerprint,
        "): give this cache a filename of its own, or delete '", index_path, "' and '", data_path,
        "' to write it again"));
  }
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(data_path, error);
  if (error) {
    return Damaged(filename, absl::StrCat("'", data_path, "' cannot be read (", error.message(),
                                          ") though the index '", index_path, "' exists"));
  }
  if (static_cast<int64_t>(size) != data_bytes) {
    return Damaged(filename, absl::StrCat("'", data_path, "' has ", size, " bytes where its index '",
                                          index_path, "' says ", data_bytes));
  }
  absl::StatusOr<std::unique_ptr<InputStream>> stream = InputStream::Open(data_path, Compression::kNone);
  if (!stream.ok()) return Prefixed(stream.status());
  return std::unique_ptr<CacheFileReader>(new CacheFileReader(
      filename, std::make_unique<TFRecordReader>(*std::move(stream)), elements, data_bytes));
}

absl::StatusOr<bool> CacheFileReader::Next(Element* element) {
  if (position_ >= elements_) {
    if (offset_ != data_bytes_) {
      return Damaged(filename_, absl::StrCat("'", data_path_, "' holds more than the ", elements_,
                                             " elements its index says"));
    }
    return false;
  }
  std::string record;
  absl::StatusOr<bool> got = records_->ReadRecord(&record);
  if (!got.ok()) return Damaged(filename_, std::string(got.status().message()));
  if (!*got) {
    return Damaged(filename_, absl::StrCat("'", data_path_, "' ends after ", position_,
                                           " elements where its index says ", elements_));
  }
  proto::ElementProto proto;
  absl::StatusOr<Element> parsed = proto.ParseFromString(record)
                                       ? ElementFromProto(proto)
                                       : absl::InvalidArgumentError("not a serialized element");
  if (!parsed.ok()) {
    return Damaged(filename_,
                   absl::StrCat("record ", position_, " of '", data_path_, "': ", parsed.status().message()));
  }
  *element = *std::move(parsed);
  ++position_;
  offset_ += kRecordOverhead + static_cast<int64_t>(record.size());
  return true;
}

absl::Status CacheFileReader::Skip(int64_t count) {
  Element skipped;
  return Prefixed(SkipItems(
      count, [&] { return Next(&skipped); }, data_path_, "elements"));
}

CacheFileWriter::CacheFileWriter(std::string filename, std::string fingerprint, std::string writer_id)
    : filename_(std::move(filename)),
      fingerprint_(std::move(fingerprint)),
      writer_id_(std::move(writer_id)),
      temp_path_(TempPath(filename_, writer_id_)) {}

CacheFileWriter::~CacheFileWriter() {
  if (!finished_) Abandon();
}

void CacheFileWriter::Abandon() {
  records_.reset();
  unlink(temp_path_.c_str());
  if (holds_lock_ && LockIsOurs(filename_, writer_id_)) unlink(LockPath(filename_).c_str());
  holds_lock_ = false;
}

absl::Status CacheFileWriter::Open() {
  absl::StatusOr<std::unique_ptr<TFRecordWriter>> records = TFRecordWriter::Create(temp_path_);
  if (!records.ok()) return Prefixed(records.status());
  records_ = *std::move(records);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CacheFileWriter>> CacheFileWriter::Start(const std::string& filename,
                                                                        const std::string& fingerprint) {
  const std::filesystem::path directory = std::filesystem::path(filename).parent_path();
  std::error_code error;
  if (!directory.empty()) std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cache: cannot create the directory '",
                                                    directory.string(), "' for '", filename,
                                                    "': ", error.message()));
  }
  std::unique_ptr<CacheFileWriter> writer(new CacheFileWriter(filename, fingerprint, NewWriterId()));
  // Twice: a lock removed between our create and our read is gone, not held.
  for (int attempt = 0; attempt < 2 && !writer->holds_lock_; ++attempt) {
    absl::StatusOr<bool> created = CreateLock(filename, writer->writer_id_);
    if (!created.ok()) return created.status();
    if (*created) {
      writer->holds_lock_ = true;
      break;
    }
    absl::StatusOr<std::optional<LockInfo>> lock = ReadLock(filename);
    if (!lock.ok()) return lock.status();
    if (!lock->has_value()) continue;
    if (!IsStale(**lock)) return LockHeld(filename, **lock);
    spdlog::warn("cache: replacing the stale lock file '{}' ({}): its writer no longer runs",
                 LockPath(filename), (*lock)->text);
    absl::StatusOr<bool> replaced = ReplaceLock(filename, writer->writer_id_);
    if (!replaced.ok()) return replaced.status();
    writer->holds_lock_ = *replaced;
  }
  if (!writer->holds_lock_) {
    absl::StatusOr<std::optional<LockInfo>> lock = ReadLock(filename);
    return LockHeld(filename, lock.ok() && lock->has_value() ? **lock : LockInfo{});
  }
  if (absl::Status s = writer->Open(); !s.ok()) return s;
  return writer;
}

absl::StatusOr<std::unique_ptr<CacheFileWriter>> CacheFileWriter::Resume(const std::string& filename,
                                                                         const CacheWriterCheckpoint& saved,
                                                                         const std::string& fingerprint) {
  if (CacheFilesComplete(filename)) return std::unique_ptr<CacheFileWriter>();
  auto cannot = [&](const std::string& why) {
    spdlog::warn(
        "cache: the pass restored from a checkpoint goes on without writing the cache '{}': {}; a later "
        "pass writes it",
        filename, why);
    return std::unique_ptr<CacheFileWriter>();
  };
  if (!IsWriterId(saved.writer_id)) return MalformedState("the cache's writer id is not one");
  const std::string saved_temp = TempPath(filename, saved.writer_id);
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(saved_temp, error);
  if (error || static_cast<int64_t>(size) < saved.bytes) {
    return cannot(error ? absl::StrCat("its temp file '", saved_temp, "' is gone (", error.message(), ")")
                        : absl::StrCat("its temp file '", saved_temp, "' has ", size,
                                       " bytes, fewer than the ", saved.bytes, " at the save"));
  }
  std::unique_ptr<CacheFileWriter> writer(new CacheFileWriter(filename, fingerprint, NewWriterId()));
  absl::StatusOr<std::optional<LockInfo>> lock = ReadLock(filename);
  if (!lock.ok()) return lock.status();
  const bool stale = lock->has_value() && IsStale(**lock);
  absl::StatusOr<bool> taken = false;
  if (!lock->has_value()) {
    taken = CreateLock(filename, writer->writer_id_);
  } else if ((*lock)->writer == saved.writer_id || stale) {
    taken = ReplaceLock(filename, writer->writer_id_);
  }
  if (!taken.ok()) return taken.status();
  if (!*taken) {
    return cannot(absl::StrCat("another iterator is writing it (its lock file '", LockPath(filename),
                               "': ", lock->has_value() ? (*lock)->text : "", ")"));
  }
  writer->holds_lock_ = true;
  if (absl::Status s = writer->Open(); !s.ok()) return s;
  absl::StatusOr<bool> copied = writer->CopyPrefix(saved);
  if (!copied.ok()) return cannot(std::string(copied.status().message()));
  if (!*copied) {
    return cannot(absl::StrCat("its temp file '", saved_temp, "' no longer holds the ", saved.elements,
                               " elements of the save"));
  }
  // Its writer is dead: nothing else will remove it.
  if (stale) unlink(saved_temp.c_str());
  return writer;
}

absl::StatusOr<bool> CacheFileWriter::CopyPrefix(const CacheWriterCheckpoint& saved) {
  absl::StatusOr<std::unique_ptr<InputStream>> stream =
      InputStream::Open(TempPath(filename_, saved.writer_id), Compression::kNone);
  if (!stream.ok()) return stream.status();
  TFRecordReader reader(*std::move(stream));
  std::string record;
  while (elements_ < saved.elements) {
    absl::StatusOr<bool> got = reader.ReadRecord(&record);
    if (!got.ok()) return got.status();
    if (!*got) return false;
    if (absl::Status s = records_->Write(record); !s.ok()) return s;
    ++elements_;
    bytes_ += kRecordOverhead + static_cast<int64_t>(record.size());
  }
  return bytes_ == saved.bytes;
}

absl::Status CacheFileWriter::Add(const Element& element) {
  proto::ElementProto proto;
  ElementToProto(element, &proto);
  const std::string record = proto.SerializeAsString();
  if (absl::Status s = records_->Write(record); !s.ok()) return Prefixed(s);
  ++elements_;
  bytes_ += kRecordOverhead + static_cast<int64_t>(record.size());
  return absl::OkStatus();
}

absl::StatusOr<CacheWriterCheckpoint> CacheFileWriter::Checkpoint() {
  // TFRecordWriter buffers in its FILE*, which it does not expose: flush
  // every stream (stdio's own locks make that safe beside other threads).
  if (std::fflush(nullptr) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cache: cannot flush '", temp_path_, "': ", std::strerror(errno)));
  }
  return CacheWriterCheckpoint{
      .writer_id = writer_id_, .temp_path = temp_path_, .elements = elements_, .bytes = bytes_};
}

absl::Status CacheFileWriter::Finish() {
  auto publish = [&]() -> absl::Status {
    if (absl::Status s = records_->Close(); !s.ok()) return Prefixed(s);
    records_.reset();
    if (absl::Status s = SyncFile(temp_path_); !s.ok()) return s;
    // Another writer finished first, or took the lock over from a
    // checkpoint of this pass and will finish it: ours is not needed.
    if (!LockIsOurs(filename_, writer_id_) || CacheFilesComplete(filename_)) return absl::OkStatus();
    if (rename(temp_path_.c_str(), DataPath(filename_).c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat("cache: cannot rename '", temp_path_, "' to '",
                                                 DataPath(filename_), "': ", std::strerror(errno)));
    }
    // The index last, atomically (fsyncing the directory after both).
    return Prefixed(WriteFileAtomically(
        IndexPath(filename_), absl::StrCat(kIndexVersion, " elements=", elements_, " data_bytes=", bytes_,
                                           " fingerprint=", fingerprint_, "\n")));
  };
  const absl::Status status = publish();
  Abandon();  // the temp file if still there, and the lock
  finished_ = true;
  return status;
}

}  // namespace sluice
