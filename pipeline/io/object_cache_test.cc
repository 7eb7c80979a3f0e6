#include "pipeline/io/object_cache.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/testing/test_util.h"

namespace sluice::io {
namespace {

namespace fs = std::filesystem;

void WriteAged(const std::string& path, size_t bytes, int age_seconds) {
  std::ofstream(path) << std::string(bytes, 'x');
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(age_seconds));
}

TEST_CASE("object cache: a copy is named by URL, ETag and size", "[io][cache]") {
  const ObjectInfo info{"s3://b/k", 10, "e1"};
  const std::string path = CachedObjectPath("/cache", info);
  CHECK(path.substr(0, 7) == "/cache/");
  CHECK(path.size() == 7 + 64 + 7);
  CHECK(path.substr(path.size() - 7) == ".object");
  CHECK(CachedObjectPath("/cache", {"s3://b/k", 10, "e2"}) != path);
  CHECK(CachedObjectPath("/cache", {"s3://b/k", 11, "e1"}) != path);
  CHECK(CachedObjectPath("/cache", {"s3://b/k2", 10, "e1"}) != path);
  CHECK(CachedObjectPath("/cache", info) == path);
}

TEST_CASE("object cache: eviction removes the least recently used copies, never a file being written",
          "[io][cache]") {
  testing::TempDir dir;
  WriteAged(dir.File("oldest.object"), 100, 300);
  WriteAged(dir.File("middle.object"), 100, 200);
  WriteAged(dir.File("newest.object"), 100, 100);
  WriteAged(dir.File("incoming.object.1.0.tmp"), 500, 1000);
  // 300 bytes held; 100 more must fit under 250: the two oldest go.
  EvictObjects(dir.path(), 250, 100);
  CHECK_FALSE(fs::exists(dir.File("oldest.object")));
  CHECK_FALSE(fs::exists(dir.File("middle.object")));
  CHECK(fs::exists(dir.File("newest.object")));
  CHECK(fs::exists(dir.File("incoming.object.1.0.tmp")));
  // Room enough already: nothing goes.
  EvictObjects(dir.path(), 1000, 100);
  CHECK(fs::exists(dir.File("newest.object")));
}

TEST_CASE("object cache: an object larger than the cache is not cached", "[io][cache]") {
  testing::TempDir dir;
  const absl::StatusOr<int> fd = OpenCachedObject(dir.path(), 100, {"s3://b/big", 101, "e"}, 1 << 20, 1);
  CHECK(fd.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(fd.status().message() == "'s3://b/big' is larger than the cache");
  CHECK(fs::is_empty(dir.path()));
}

}  // namespace
}  // namespace sluice::io
