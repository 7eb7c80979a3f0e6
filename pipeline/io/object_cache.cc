#include "pipeline/io/object_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "pipeline/io/remote_file.h"
#include "pipeline/io/sigv4.h"

namespace sluice::io {
namespace fs = std::filesystem;

std::string CachedObjectPath(const std::string& cache_dir, const ObjectInfo& info) {
  return absl::StrCat(cache_dir, "/", Sha256Hex(absl::StrCat(info.url, "\n", info.etag, "\n", info.size)),
                      ".object");
}

void EvictObjects(const std::string& cache_dir, int64_t max_bytes, int64_t incoming) {
  struct Entry {
    fs::path path;
    int64_t size;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  std::error_code error;
  for (fs::directory_iterator it(cache_dir, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() != ".object") continue;
    std::error_code entry_error;
    const auto size = static_cast<int64_t>(it->file_size(entry_error));
    const fs::file_time_type used = it->last_write_time(entry_error);
    if (entry_error) continue;
    entries.push_back({it->path(), size, used});
    total += size;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& entry : entries) {
    if (total + incoming <= max_bytes) break;
    if (fs::remove(entry.path, error)) total -= entry.size;
  }
}

absl::StatusOr<int> OpenCachedObject(const std::string& cache_dir, int64_t max_bytes, const ObjectInfo& info,
                                     uint64_t part_bytes, int parts_in_flight) {
  if (static_cast<int64_t>(info.size) > max_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("'", info.url, "' is larger than the cache"));
  }
  const std::string path = CachedObjectPath(cache_dir, info);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    // Used now: the last to be evicted.
    futimens(fd, nullptr);
    return fd;
  }
  EvictObjects(cache_dir, max_bytes, static_cast<int64_t>(info.size));
  static std::atomic<uint64_t> serial{0};
  const std::string temporary = absl::StrCat(path, ".", getpid(), ".", serial.fetch_add(1), ".tmp");
  const int out = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("object_storage.cache: cannot create '", temporary, "': ", std::strerror(errno)));
  }
  RemoteFile remote(info, part_bytes, parts_in_flight);
  std::vector<char> buffer(size_t{1} << 20);
  absl::Status status;
  uint64_t written = 0;
  while (status.ok()) {
    absl::StatusOr<size_t> got = remote.Read(buffer.data(), buffer.size());
    if (!got.ok()) {
      status = got.status();
      break;
    }
    if (*got == 0) break;
    if (const int error = WriteFully(out, std::string_view(buffer.data(), *got)); error != 0) {
      status = absl::ResourceExhaustedError(
          absl::StrCat("object_storage.cache: writing '", temporary, "': ", std::strerror(error)));
    }
    written += *got;
  }
  close(out);
  if (status.ok() && written != info.size) {
    status = absl::DataLossError(absl::StrCat("'", info.url, "' gave ", written, " bytes, not ", info.size));
  }
  if (status.ok() && rename(temporary.c_str(), path.c_str()) != 0) {
    status = absl::PermissionDeniedError(
        absl::StrCat("object_storage.cache: cannot rename '", temporary, "': ", std::strerror(errno)));
  }
  if (!status.ok()) {
    unlink(temporary.c_str());
    return status;
  }
  fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("object_storage.cache: cannot open '", path, "': ", std::strerror(errno)));
  }
  return fd;
}

}  // namespace sluice::io
