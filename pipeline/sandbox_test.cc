#include "pipeline/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

// Turns the sandbox on for one test and off again after.
class ScopedSandbox {
 public:
  explicit ScopedSandbox(std::vector<std::string> roots, const std::string& cache_dir = "") {
    absl::StatusOr<std::vector<std::string>> canonical = CanonicalDataRoots(roots);
    REQUIRE(canonical.ok());
    absl::StatusOr<std::string> cache = cache_dir.empty() ? "" : CanonicalCacheDir(cache_dir);
    REQUIRE(cache.ok());
    SetPipelineSandbox(
        {.enabled = true, .data_roots = *canonical, .cache_dir = *cache, .owner = "worker w:1"});
  }
  ~ScopedSandbox() { SetPipelineSandbox({}); }
};

TEST_CASE("sandbox: paths are judged after symlinks and '..'", "[pipeline][sandbox]") {
  testing::TempDir dir;
  const std::string root = dir.File("data");
  std::filesystem::create_directories(root + "/train");
  std::ofstream(root + "/train/a.txt") << "a\n";
  std::ofstream(dir.File("secret.txt")) << "s\n";
  std::filesystem::create_symlink(dir.File("secret.txt"), root + "/train/link.txt");
  std::filesystem::create_directories(dir.File("data2"));  // a sibling whose name starts like the root
  std::ofstream(dir.File("data2/b.txt")) << "b\n";
  const std::string canonical_root = std::filesystem::canonical(root).string();
  ScopedSandbox sandbox({root});

  CHECK(CheckReadablePath(root + "/train/a.txt").ok());
  CHECK(CheckReadablePath(root + "/train/../train/a.txt").ok());
  CHECK(CheckReadablePath(root + "/train/not-there-yet.txt").ok());
  absl::Status dotdot = CheckReadablePath(root + "/../secret.txt");
  CHECK(dotdot.code() == absl::StatusCode::kPermissionDenied);
  CHECK(std::string(dotdot.message()) == "'" + root + "/../secret.txt' (resolved: '" +
                                             std::filesystem::canonical(dir.File("secret.txt")).string() +
                                             "') is outside the data roots of worker w:1 (" + canonical_root +
                                             "): file sources read only under data_roots");
  CHECK(CheckReadablePath(root + "/train/link.txt").code() == absl::StatusCode::kPermissionDenied);
  CHECK(CheckReadablePath(dir.File("data2/b.txt")).code() == absl::StatusCode::kPermissionDenied);
  CHECK(CheckReadablePath("/etc/passwd").code() == absl::StatusCode::kPermissionDenied);

  // The check that counts is on the opened file: where the open led.
  const int inside = open((root + "/train/a.txt").c_str(), O_RDONLY);
  const int through_link = open((root + "/train/link.txt").c_str(), O_RDONLY);
  REQUIRE(inside >= 0);
  REQUIRE(through_link >= 0);
  CHECK(CheckOpenedFile(inside, root + "/train/a.txt").ok());
  absl::Status linked = CheckOpenedFile(through_link, root + "/train/link.txt");
  CHECK(linked.code() == absl::StatusCode::kPermissionDenied);
  CHECK(absl::StrContains(linked.message(), "'" + root + "/train/link.txt' (resolved: '"));
  close(inside);
  close(through_link);
}

TEST_CASE("sandbox: off, or without roots, any path is readable", "[pipeline][sandbox]") {
  CHECK(CheckReadablePath("/etc/passwd").ok());
  ScopedSandbox sandbox({});
  CHECK(CheckReadablePath("/etc/passwd").ok());
}

TEST_CASE("sandbox: data roots must be directories that exist", "[pipeline][sandbox]") {
  testing::TempDir dir;
  std::ofstream(dir.File("file")) << "x";
  CHECK(std::string(CanonicalDataRoots({dir.File("missing")}).status().message()) ==
        "data_roots: '" + dir.File("missing") + "' does not exist");
  CHECK(std::string(CanonicalDataRoots({dir.File("file")}).status().message()) ==
        "data_roots: '" + dir.File("file") + "' is not a directory");
}

TEST_CASE("sandbox: file sources refuse paths outside the roots", "[pipeline][sandbox]") {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("data"));
  std::ofstream(dir.File("data/lines.txt")) << "one\ntwo\n";
  std::ofstream(dir.File("outside.txt")) << "secret\n";
  ScopedSandbox sandbox({dir.File("data")});
  absl::StatusOr<std::vector<std::string>> inside =
      testing::RunYaml("pipeline:\n  - text_line: {files: [" + dir.File("data/lines.txt") + "]}\n");
  REQUIRE(inside.ok());
  CHECK(inside->size() == 2);
  absl::StatusOr<std::vector<std::string>> outside =
      testing::RunYaml("pipeline:\n  - text_line: {files: [" + dir.File("outside.txt") + "]}\n");
  CHECK(outside.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(absl::StrContains(outside.status().message(), "is outside the data roots of worker w:1"));
  absl::StatusOr<std::vector<std::string>> listed =
      testing::RunYaml("pipeline:\n  - list_files: {pattern: " + dir.File("*.txt") + "}\n");
  CHECK(listed.status().code() == absl::StatusCode::kPermissionDenied);
  // The folder is refused before it is listed.
  CHECK(absl::StrContains(listed.status().message(), "step 1 (list_files): '" + dir.path() + "/'"));
  // A match that leads outside through a symlink is refused too.
  std::filesystem::create_symlink(dir.File("outside.txt"), dir.File("data/link.txt"));
  absl::StatusOr<std::vector<std::string>> linked =
      testing::RunYaml("pipeline:\n  - list_files: {pattern: " + dir.File("data/*.txt") + "}\n");
  CHECK(linked.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(absl::StrContains(linked.status().message(), "'" + dir.File("data/link.txt") + "' (resolved: '"));
  absl::StatusOr<std::vector<std::string>> folder =
      testing::RunYaml("pipeline:\n  - image_folder: {root: " + dir.path() + "}\n");
  CHECK(folder.status().code() == absl::StatusCode::kPermissionDenied);
}

// `read`'s status, run on its own thread: one still blocked after 10 s
// fails the test, and is let go by opening the FIFO's other end (a blocked
// open returns, its reads then end), so that the test ends either way.
absl::Status WithinTenSeconds(const std::string& fifo, std::function<absl::Status()> read) {
  std::future<absl::Status> done = std::async(std::launch::async, std::move(read));
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    FAIL_CHECK("reading '" << fifo << "' blocked for 10 s");
    const int writer = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) close(writer);
  }
  return done.get();
}

absl::Status ReadAll(const Dataset& dataset) {
  return testing::JsonLines(*testing::MustBuild(dataset)).status();
}

TEST_CASE("OpenDataFile: only regular files, and the open never blocks", "[pipeline][sandbox][hardening]") {
  testing::TempDir dir;
  const std::string fifo = dir.File("pipe");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  absl::Status status = WithinTenSeconds(fifo, [&] { return OpenDataFile(fifo, "text_line").status(); });
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "text_line: '" + fifo + "' is a FIFO: file sources read only regular files");
  status = OpenDataFile(dir.path()).status();
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "'" + dir.path() + "' is a directory: file sources read only regular files");
  status = OpenDataFile("/dev/null").status();
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "'/dev/null' is a character device: file sources read only regular files");
  status = OpenDataFile(dir.File("missing")).status();
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK(status.message() == "cannot open '" + dir.File("missing") + "': No such file or directory");
  // A regular file: open, close-on-exec, and reads block as usual.
  testing::WriteFile(dir.File("a.txt"), "a\n");
  absl::StatusOr<int> fd = OpenDataFile(dir.File("a.txt"));
  REQUIRE(fd.ok());
  CHECK((fcntl(*fd, F_GETFL) & O_NONBLOCK) == 0);
  CHECK((fcntl(*fd, F_GETFD) & FD_CLOEXEC) != 0);
  close(*fd);
}

TEST_CASE("file sources given a FIFO fail naming it, without blocking", "[pipeline][sandbox][hardening]") {
  testing::TempDir dir;
  const std::string fifo = dir.File("pipe");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const std::string refused = "'" + fifo + "' is a FIFO: file sources read only regular files";
  struct Case {
    std::string name;
    std::function<absl::Status()> read;
  };
  const std::vector<Case> cases = {
      {"text_line", [&] { return ReadAll(Dataset::TextLine({fifo})); }},
      {"text_line GZIP", [&] { return ReadAll(Dataset::TextLine({fifo}, "GZIP")); }},
      {"tfrecord", [&] { return ReadAll(Dataset::TFRecord({fifo})); }},
      {"fixed_length_record", [&] { return ReadAll(Dataset::FixedLengthRecord({fifo}, 4)); }},
      {"webdataset", [&] { return ReadAll(Dataset::WebDataset({fifo}, {"jpg"})); }},
      // Without keys, the first shard is read as the pipeline is built.
      {"webdataset without keys",
       [&] { return testing::DatasetFromYaml("- webdataset: " + fifo + "\n").status(); }},
      {"list_files into text_line",
       [&] {
         return testing::RunYaml(absl::StrCat("- list_files: ", dir.File("p*"),
                                              "\n- interleave: {pipeline: [text_line]}\n"))
             .status();
       }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const absl::Status status = WithinTenSeconds(fifo, c.read);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(status.message()), Catch::Matchers::Contains(refused));
  }
}

TEST_CASE("image_folder: an image replaced by a FIFO after the listing fails naming it",
          "[pipeline][sandbox][hardening]") {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("root/cat"));
  testing::WriteFile(dir.File("root/cat/a.jpg"), "not really a jpeg");
  absl::StatusOr<DatasetPtr> built = testing::DatasetFromYaml("- image_folder: " + dir.File("root") + "\n");
  REQUIRE(built.ok());
  std::filesystem::remove(dir.File("root/cat/a.jpg"));
  REQUIRE(mkfifo(dir.File("root/cat/a.jpg").c_str(), 0600) == 0);
  const absl::Status status =
      WithinTenSeconds(dir.File("root/cat/a.jpg"), [&] { return testing::JsonLines(**built).status(); });
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()),
             Catch::Matchers::Contains("image_folder: '" + dir.File("root/cat/a.jpg") +
                                       "' is a FIFO: file sources read only regular files"));
}

TEST_CASE("sandbox: file caches are written only under cache_dir", "[pipeline][sandbox][cache]") {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("cache"));
  std::filesystem::create_directories(dir.File("data"));
  std::filesystem::create_directories(dir.File("outside"));
  std::filesystem::create_symlink(dir.File("outside"), dir.File("cache/link"));
  const std::string cache = std::filesystem::canonical(dir.File("cache")).string();
  const std::string outside = std::filesystem::canonical(dir.File("outside")).string();
  // Off: any path, as named.
  CHECK(*CacheFilePath("/anywhere/c") == "/anywhere/c");
  CHECK(*CacheFilePath("c") == "c");
  {
    ScopedSandbox sandbox({dir.File("data")}, dir.File("cache"));
    CHECK(*CacheFilePath("c") == cache + "/c");
    CHECK(*CacheFilePath("sub/c") == cache + "/sub/c");
    CHECK(*CacheFilePath(dir.File("cache/x/../c")) == cache + "/c");
    const std::string refused =
        " is outside the cache_dir of worker w:1 (" + cache +
        "): pipelines write file caches only under cache_dir (a relative filename is taken relative to it)";
    absl::Status status = CacheFilePath(dir.File("outside/c")).status();
    CHECK(status.code() == absl::StatusCode::kPermissionDenied);
    CHECK(status.message() == "cache: '" + dir.File("outside/c") + "' (in '" + outside + "')" + refused);
    CHECK(CacheFilePath("../c").status().message() ==
          "cache: '../c' (in '" + std::filesystem::canonical(dir.path()).string() + "')" + refused);
    CHECK(CacheFilePath("link/c").status().message() == "cache: 'link/c' (in '" + outside + "')" + refused);
    CHECK(CacheFilePath(dir.File("cache/")).status().code() == absl::StatusCode::kInvalidArgument);
    // A pipeline writes its cache there and reads it back, though cache_dir
    // is not among the data roots.
    CHECK(testing::IntsOf(Dataset::Range(3).Cache("c").Repeat(2)) == std::vector<int64_t>{0, 1, 2, 0, 1, 2});
    CHECK(std::filesystem::exists(cache + "/c.index"));
    CHECK(testing::IntsOf(Dataset::Range(3).Cache("c")) == std::vector<int64_t>{0, 1, 2});
    // Refused when an iterator is made, not when the pipeline is built.
    const DatasetPtr built = testing::MustBuild(Dataset::Range(3).Cache(dir.File("outside/c")));
    CHECK(built->MakeIterator({}).status().code() == absl::StatusCode::kPermissionDenied);
    CHECK(std::filesystem::is_empty(dir.File("outside")));
  }
  {
    ScopedSandbox sandbox({});
    absl::Status status = CacheFilePath("c").status();
    CHECK(status.code() == absl::StatusCode::kPermissionDenied);
    CHECK(
        status.message() ==
        "cache: worker w:1 has no cache_dir, so pipelines cannot write file caches on it ('c'); the operator "
        "sets cache_dir, a directory the worker may write, or the pipeline caches in memory (no filename)");
    // In memory, a cache needs no cache_dir.
    CHECK(testing::IntsOf(Dataset::Range(2).Cache().Repeat(2)) == std::vector<int64_t>{0, 1, 0, 1});
  }
  testing::WriteFile(dir.File("file"), "x");
  CHECK(CanonicalCacheDir(dir.File("missing")).status().message() ==
        "cache_dir: '" + dir.File("missing") + "' does not exist");
  CHECK(CanonicalCacheDir(dir.File("file")).status().message() ==
        "cache_dir: '" + dir.File("file") + "' is not a directory");
}

TEST_CASE("sandbox: a pipeline names a plugin, and only a loaded one runs", "[pipeline][sandbox]") {
  ScopedSandbox sandbox({});
  absl::Status missing = RequirePlugin("/tmp/libnot_loaded.so");
  CHECK(missing.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(missing.message()) ==
        "the pipeline needs plugin '/tmp/libnot_loaded.so', which worker w:1 has not loaded: a daemon loads "
        "only "
        "the plugins in its own config ('plugins:'), never one a request names");
  REQUIRE(LoadPlugin(SLUICE_EXAMPLE_PLUGIN).ok());
  // By file name: the client's path to it need not be the worker's.
  CHECK(RequirePlugin("/elsewhere/" + std::filesystem::path(SLUICE_EXAMPLE_PLUGIN).filename().string()).ok());
}

}  // namespace
}  // namespace sluice
