// Whole-file reads and writes on a descriptor the caller opened, with
// EINTR and short reads and writes handled once, for the journal, the
// token and certificate files, image files and atomic writes. They return
// the errno, so that each caller words its own error (naming its setting,
// its step and the path).
#ifndef SLUICE_COMMON_FILE_IO_H_
#define SLUICE_COMMON_FILE_IO_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice {

// Reads `fd` from its offset to its end into *contents, sized once from
// fstat (a snapshot may be most of 2 GiB: growing a buffer would hold it
// twice), then grown if the file grew. Returns 0; the errno of a failed
// fstat or read; or EFBIG once more than `max_bytes` arrived (*contents
// then holds the first max_bytes + 1). The caller closes `fd`.
int ReadToEnd(int fd, size_t max_bytes, std::string* contents);

// Writes all of `bytes` to `fd`. Returns 0, or the errno of the failed
// write.
int WriteFully(int fd, std::string_view bytes);

}  // namespace sluice

#endif  // SLUICE_COMMON_FILE_IO_H_
