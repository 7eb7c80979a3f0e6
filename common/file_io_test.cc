#include "common/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>

namespace sluice {
namespace {

// A file of `contents` in a fresh temporary directory, opened for reading.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    char dir[] = "/tmp/file_io_test_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    dir_ = dir;
    path_ = dir_ + "/file";
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(WriteFully(fd, contents) == 0);
    ::close(fd);
  }
  ~TempFile() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  int Open() const { return ::open(path_.c_str(), O_RDONLY | O_CLOEXEC); }

 private:
  std::string dir_;
  std::string path_;
};

TEST_CASE("file_io: a file reads whole, from the descriptor's offset", "[common][file_io]") {
  std::string bytes(100000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  TempFile file(bytes);
  const int fd = file.Open();
  REQUIRE(fd >= 0);
  std::string contents;
  CHECK(ReadToEnd(fd, SIZE_MAX, &contents) == 0);
  CHECK(contents == bytes);
  REQUIRE(::lseek(fd, 99990, SEEK_SET) == 99990);
  CHECK(ReadToEnd(fd, 10, &contents) == 0);
  CHECK(contents == bytes.substr(99990));
  ::close(fd);
}

TEST_CASE("file_io: past max_bytes is EFBIG, holding one byte more than the limit", "[common][file_io]") {
  TempFile file("0123456789");
  const int fd = file.Open();
  REQUIRE(fd >= 0);
  std::string contents;
  CHECK(ReadToEnd(fd, 4, &contents) == EFBIG);
  CHECK(contents == "01234");
  ::close(fd);
  std::string empty = "stale";
  TempFile none("");
  const int empty_fd = none.Open();
  CHECK(ReadToEnd(empty_fd, 0, &empty) == 0);
  CHECK(empty.empty());
  ::close(empty_fd);
}

TEST_CASE("file_io: a pipe, which has no size, reads to its end, and errors are the errno",
          "[common][file_io]") {
  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  const std::string sent(300000, 'x');
  std::thread writer([&] {
    CHECK(WriteFully(ends[1], sent) == 0);
    ::close(ends[1]);
  });
  std::string contents;
  CHECK(ReadToEnd(ends[0], SIZE_MAX, &contents) == 0);
  writer.join();
  ::close(ends[0]);
  CHECK(contents == sent);
  CHECK(ReadToEnd(-1, 10, &contents) == EBADF);
  CHECK(WriteFully(-1, "x") == EBADF);
  CHECK(WriteFully(-1, "") == 0);
}

}  // namespace
}  // namespace sluice
