#include "pipeline/sandbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "pipeline/builder.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

// Turns the sandbox on for one test and off again after.
class ScopedSandbox {
 public:
  explicit ScopedSandbox(std::vector<std::string> roots) {
    absl::StatusOr<std::vector<std::string>> canonical = CanonicalDataRoots(roots);
    REQUIRE(canonical.ok());
    SetPipelineSandbox({.enabled = true, .data_roots = *canonical, .owner = "worker w:1"});
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
