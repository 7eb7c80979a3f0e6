#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"

namespace sluice {
namespace {

absl::Status Failed(const std::string& what, const std::string& path, int error) {
  return absl::UnavailableError(absl::StrCat("cannot ", what, " '", path, "': ", std::strerror(error)));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  // Owner-only: saved states hold their read's restore key, and lock and
  // cache files a tenant's names.
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Failed("create", temporary, errno);
  if (::fchmod(fd, 0600) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    return Failed("chmod", temporary, error);
  }
  if (const int error = WriteFully(fd, std::string_view(bytes.data(), bytes.size())); error != 0) {
    ::close(fd);
    ::unlink(temporary.c_str());
    return Failed("write", temporary, error);
  }
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    return Failed("fsync", temporary, error);
  }
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    return Failed("rename a file over", path, error);
  }
  // The rename itself survives a crash only once the directory is synced.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string directory = parent.empty() ? std::string(".") : parent.string();
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

}  // namespace sluice
