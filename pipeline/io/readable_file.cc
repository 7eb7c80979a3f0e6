#include "pipeline/io/readable_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/exceptions.h"
#include "pipeline/io/object_cache.h"
#include "pipeline/io/object_client.h"
#include "pipeline/io/object_storage_settings.h"
#include "pipeline/io/object_url.h"
#include "pipeline/io/remote_file.h"
#include "pipeline/sandbox.h"

namespace sluice::io {
namespace {

class LocalFile : public ReadableFile {
 public:
  LocalFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~LocalFile() override { close(fd_); }
  absl::Status SeekBeforeReading(uint64_t offset) override {
    struct stat info {};
    if (fstat(fd_, &info) != 0) {
      return absl::DataLossError(absl::StrCat("cannot stat '", path_, "': ", std::strerror(errno)));
    }
    if (static_cast<uint64_t>(info.st_size) < offset) return ChangedSinceSave(path_, info.st_size, offset);
    if (lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) {
      return absl::DataLossError(absl::StrCat("cannot seek in '", path_, "': ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> Read(char* buffer, size_t n) override {
    while (true) {
      const ssize_t got = read(fd_, buffer, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) {
        return absl::DataLossError(absl::StrCat("read error in '", path_, "': ", std::strerror(errno)));
      }
    }
  }

 private:
  const int fd_;
  const std::string path_;
};

}  // namespace

absl::Status ChangedSinceSave(const std::string& path, uint64_t size, uint64_t offset) {
  return absl::DataLossError(absl::StrCat("'", path, "' is ", size,
                                          " bytes now; the saved state reads on at byte ", offset,
                                          " (the file changed since the save)"));
}

absl::StatusOr<std::unique_ptr<ReadableFile>> OpenObject(const ObjectInfo& info) {
  if (absl::Status allowed = CheckReadableUrl(info.url); !allowed.ok()) return allowed;
  absl::StatusOr<std::shared_ptr<const ObjectStorageContext>> context = CurrentObjectStorage();
  if (!context.ok()) return context.status();
  const ObjectStorageContext& settings = **context;
  if (!settings.cache_dir.empty() && static_cast<int64_t>(info.size) <= settings.cache_max_bytes) {
    absl::StatusOr<int> fd = OpenCachedObject(settings.cache_dir, settings.cache_max_bytes, info,
                                              settings.part_bytes, settings.parts_in_flight);
    if (fd.ok()) return std::make_unique<LocalFile>(*fd, info.url);
    if (!absl::IsResourceExhausted(fd.status()) && !absl::IsPermissionDenied(fd.status())) return fd.status();
    // A full or unwritable cache disk: the object is streamed instead.
  }
  return std::make_unique<RemoteFile>(info, settings.part_bytes, settings.parts_in_flight);
}

absl::StatusOr<std::unique_ptr<ReadableFile>> OpenReadableFile(const std::string& path,
                                                               const std::string& op) {
  if (HasUrlScheme(path)) {
    absl::StatusOr<ObjectInfo> info = StatObject(path);
    if (!info.ok()) {
      return absl::Status(info.status().code(),
                          absl::StrCat(op.empty() ? "" : op + ": ", info.status().message()));
    }
    return OpenObject(*info);
  }
  absl::StatusOr<int> fd = OpenDataFile(path, op);
  if (!fd.ok()) return fd.status();
  return std::make_unique<LocalFile>(*fd, path);
}

struct FileOpenedAhead::State {
  std::atomic<bool> abandoned{false};
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<std::unique_ptr<ReadableFile>> file ABSL_GUARDED_BY(mu);
};

std::shared_ptr<FileOpenedAhead> FileOpenedAhead::Start(std::string path) {
  auto state = std::make_shared<State>();
  RunOnFetchThreads([path, state] {
    absl::StatusOr<std::unique_ptr<ReadableFile>> file =
        state->abandoned.load()
            ? absl::CancelledError("not needed any more")
            : CallContained("opening a file ahead", [&] { return OpenReadableFile(path); });
    if (file.ok() && !state->abandoned.load()) (*file)->StartReading();
    absl::MutexLock lock(&state->mu);
    state->file = std::move(file);
    state->done = true;
  });
  return std::shared_ptr<FileOpenedAhead>(new FileOpenedAhead(std::move(path), std::move(state)));
}

FileOpenedAhead::~FileOpenedAhead() {
  state_->abandoned.store(true);
  absl::StatusOr<std::unique_ptr<ReadableFile>> file;
  {
    absl::MutexLock lock(&state_->mu);
    state_->mu.Await(absl::Condition(&state_->done));
    file = std::move(state_->file);
  }
  // Destroyed here, outside the lock: a remote file waits for its parts.
}

absl::StatusOr<std::unique_ptr<ReadableFile>> FileOpenedAhead::Take() {
  absl::MutexLock lock(&state_->mu);
  state_->mu.Await(absl::Condition(&state_->done));
  return std::move(state_->file);
}

namespace {

// Reads into the string itself, grown as bytes come (`expected`: the size
// known ahead, an object's): no bounce buffer, one allocation for an image.
absl::StatusOr<std::string> ReadAll(ReadableFile& file, const std::string& path, const std::string& op,
                                    size_t max_bytes, size_t expected = 0) {
  std::string bytes;
  size_t filled = 0;
  bytes.resize(std::min(max_bytes, expected) + 1);
  while (true) {
    if (filled == bytes.size())
      bytes.resize(std::min(max_bytes + 1, std::max<size_t>(2 * bytes.size(), 64 << 10)));
    absl::StatusOr<size_t> got = file.Read(bytes.data() + filled, bytes.size() - filled);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    filled += *got;
    if (filled > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": '", path, "' is larger than ", max_bytes, " bytes, the most ", op, " reads"));
    }
  }
  bytes.resize(filled);
  return bytes;
}

}  // namespace

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& op, size_t max_bytes) {
  absl::StatusOr<std::unique_ptr<ReadableFile>> file = OpenReadableFile(path, op);
  if (!file.ok()) return file.status();
  return ReadAll(**file, path, op, max_bytes);
}

absl::StatusOr<std::string> ReadWholeObject(const ObjectInfo& info, const std::string& op, size_t max_bytes) {
  if (info.size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": '", info.url, "' is ", info.size,
                                                   " bytes, more than the ", max_bytes, "-byte limit"));
  }
  absl::StatusOr<std::unique_ptr<ReadableFile>> file = OpenObject(info);
  if (!file.ok()) return file.status();
  return ReadAll(**file, info.url, op, max_bytes, info.size);
}

}  // namespace sluice::io
