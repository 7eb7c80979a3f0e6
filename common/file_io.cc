#include "common/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace sluice {

int ReadToEnd(int fd, size_t max_bytes, std::string* contents) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return errno;
  const off_t offset = ::lseek(fd, 0, SEEK_CUR);
  const size_t expected = info.st_size > 0 && offset >= 0 && info.st_size > offset
                              ? static_cast<size_t>(info.st_size - offset)
                              : 0;
  // One byte past the limit shows that the file is longer.
  const size_t cap = max_bytes < SIZE_MAX ? max_bytes + 1 : max_bytes;
  // What fstat promised, read in place.
  contents->assign(std::min(expected, cap), '\0');
  size_t filled = 0;
  while (filled < contents->size()) {
    const ssize_t got = ::read(fd, contents->data() + filled, contents->size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno;
    if (got == 0) break;  // shrunk since fstat
    filled += static_cast<size_t>(got);
  }
  contents->resize(filled);
  // Then what it grew by, if anything (a pipe or /proc file has no size).
  char chunk[65536];
  while (contents->size() < cap) {
    const ssize_t got = ::read(fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno;
    if (got == 0) break;
    contents->append(chunk, std::min(static_cast<size_t>(got), cap - contents->size()));
  }
  return contents->size() > max_bytes ? EFBIG : 0;
}

int WriteFully(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno;
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return 0;
}

}  // namespace sluice
