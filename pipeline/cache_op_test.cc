// Tests of cache (cache_op.cc, cache_files.cc): tf.data's documented
// example, the input run once over many passes (memory and files), the
// files read by a new build, what a partial pass leaves (nothing), the
// lock against a second writer and a stale one, damaged files, max_bytes,
// exact checkpoints in every mode, and the YAML form.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "pipeline/builder.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"
#include "sluice/iterator.h"
#include "tests/testing/checkpoint_util.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::IntsOf;
using testing::MustBuild;
using testing::MustIterate;
using testing::TempDir;
using Ints = std::vector<int64_t>;
using Lines = std::vector<std::string>;

// The input's elements as they are, counting the calls: how often the
// steps before the cache ran.
Dataset Counted(const Dataset& input, std::shared_ptr<std::atomic<int>> calls) {
  return input.MapLocal([calls](const Element& e) -> absl::StatusOr<Element> {
    ++*calls;
    return e;
  });
}

Ints ReadInts(const DatasetPtr& built) {
  absl::StatusOr<std::vector<Element>> elements = CollectElements(*built);
  INFO(elements.status().ToString());
  REQUIRE(elements.ok());
  return testing::Int64Values(*elements);
}

// The names in `dir`, sorted.
std::vector<std::string> Files(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// The first GetNext's status of a fresh iterator of `built`.
absl::Status FirstStatus(const DatasetPtr& built) {
  std::unique_ptr<IteratorBase> it = MustIterate(built);
  Element element;
  bool end = false;
  return it->GetNext(&element, &end);
}

const Lines kComplete = {"c.data", "c.index"};

TEST_CASE("cache: tf.data's example, the second pass reads the cache", "[ops][cache]") {
  // tf.data: range(5).map(lambda x: x * x).cache(); list(dataset) twice
  // gives [0, 1, 4, 9, 16] both times, the map running in the first only.
  auto calls = std::make_shared<std::atomic<int>>(0);
  const DatasetPtr built = MustBuild(Counted(Dataset::Range(5).Map("square"), calls).Cache());
  CHECK(ReadInts(built) == Ints{0, 1, 4, 9, 16});
  CHECK(*calls == 5);
  CHECK(ReadInts(built) == Ints{0, 1, 4, 9, 16});
  CHECK(*calls == 5);
  CHECK(built->Cardinality() == 5);
}

TEST_CASE("cache: the input runs once however many passes read it", "[ops][cache]") {
  TempDir dir;
  for (const std::string& filename : {std::string(), dir.File("c")}) {
    INFO("filename '" << filename << "'");
    auto calls = std::make_shared<std::atomic<int>>(0);
    // Reshuffled each pass, were the input run again.
    const Dataset cached = Counted(Dataset::Range(8).Shuffle(8, 3), calls).Cache(filename).Repeat(3);
    const Ints got = IntsOf(cached);
    REQUIRE(got.size() == 24);
    CHECK(Ints(got.begin(), got.begin() + 8) == Ints(got.begin() + 8, got.begin() + 16));
    CHECK(Ints(got.begin(), got.begin() + 8) == Ints(got.begin() + 16, got.end()));
    CHECK(*calls == 8);
  }
  CHECK(Files(dir) == kComplete);
}

TEST_CASE("cache: a new build reads the files without running the input", "[ops][cache]") {
  TempDir dir;
  auto calls = std::make_shared<std::atomic<int>>(0);
  const Dataset cached = Counted(Dataset::Range(6).Map("square"), calls).Cache(dir.File("c"));
  CHECK(IntsOf(cached) == Ints{0, 1, 4, 9, 16, 25});
  CHECK(*calls == 6);
  CHECK(Files(dir) == kComplete);
  CHECK_THAT(Contents(dir.File("c.index")),
             Catch::Matchers::Matches(absl::StrCat(
                 "sluice-cache 2 elements=6 data_bytes=", std::filesystem::file_size(dir.File("c.data")),
                 " fingerprint=[0-9a-f]{32}\n")));
  // Owner-only, whatever the umask: a cache holds a tenant's data.
  for (const char* file : {"c.index", "c.data"}) {
    INFO(file);
    CHECK((std::filesystem::status(dir.File(file)).permissions() & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  }
  // Another Dataset::MakeIterator: another build, the same files.
  absl::StatusOr<Iterator> again = cached.MakeIterator();
  REQUIRE(again.ok());
  CHECK(testing::Read(*again, 100) == Lines{"0", "1", "4", "9", "16", "25"});
  CHECK(*calls == 6);
  // A relative directory that does not exist yet is made.
  CHECK(IntsOf(Dataset::Range(2).Cache(dir.File("sub/dir/c"))) == Ints{0, 1});
  CHECK(std::filesystem::exists(dir.File("sub/dir/c.index")));
}

TEST_CASE("cache: a pass left before its end keeps nothing", "[ops][cache]") {
  TempDir dir;
  for (const std::string& filename : {std::string(), dir.File("c")}) {
    INFO("filename '" << filename << "'");
    auto calls = std::make_shared<std::atomic<int>>(0);
    const DatasetPtr built = MustBuild(Counted(Dataset::Range(5), calls).Cache(filename));
    {
      std::unique_ptr<IteratorBase> partial = MustIterate(built);
      Element element;
      bool end = false;
      REQUIRE(partial->GetNext(&element, &end).ok());
      REQUIRE(partial->GetNext(&element, &end).ok());
      if (!filename.empty()) CHECK(Files(dir).size() == 2);  // the lock and the temp file
    }
    CHECK(Files(dir).empty());
    CHECK(ReadInts(built) == Ints{0, 1, 2, 3, 4});
    CHECK(*calls == 7);
    CHECK(ReadInts(built) == Ints{0, 1, 2, 3, 4});
    CHECK(*calls == 7);
  }
  CHECK(Files(dir) == kComplete);
}

TEST_CASE("cache: a second writer of the same files is refused", "[ops][cache]") {
  TempDir dir;
  const std::string filename = dir.File("c");
  const DatasetPtr built = MustBuild(Dataset::Range(5).Cache(filename));
  std::unique_ptr<IteratorBase> writer = MustIterate(built);
  Element element;
  bool end = false;
  REQUIRE(writer->GetNext(&element, &end).ok());
  std::string lock = Contents(filename + ".lockfile");
  REQUIRE(absl::StartsWith(lock, absl::StrCat("pid=", getpid(), " host=", HostName(), " writer=")));
  REQUIRE(absl::EndsWith(lock, "\n"));
  lock.pop_back();
  const absl::Status second = FirstStatus(MustBuild(Dataset::Range(5).Cache(filename)));
  CHECK(second.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(second.message() == "cache: another iterator is writing the cache '" + filename +
                                "' (its lock file '" + filename + ".lockfile': " + lock +
                                "); if none is, delete the lock file");
  // The first goes on and completes the cache.
  while (!end) REQUIRE(writer->GetNext(&element, &end).ok());
  CHECK(Files(dir) == kComplete);
  CHECK(ReadInts(MustBuild(Dataset::Range(5).Cache(filename))) == Ints{0, 1, 2, 3, 4});
  // A lock of another host is never judged stale (its process may live).
  testing::WriteFile(dir.File("d.lockfile"), "pid=1 host=elsewhere writer=0123456789abcdef time=x\n");
  CHECK(FirstStatus(MustBuild(Dataset::Range(5).Cache(dir.File("d")))).code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("cache: a stale lock of a dead process is replaced", "[ops][cache]") {
  TempDir dir;
  // A pid past any pid_max: no such process.
  testing::WriteFile(dir.File("c.lockfile"),
                     "pid=2147480000 host=" + HostName() + " writer=0123456789abcdef time=x\n");
  testing::WriteFile(dir.File("c.data.0123456789abcdef.tmp"), "half a pass");
  CHECK(IntsOf(Dataset::Range(4).Cache(dir.File("c"))) == Ints{0, 1, 2, 3});
  // Its temp file stays: a checkpoint of that pass may still resume it.
  CHECK(Files(dir) == Lines{"c.data", "c.data.0123456789abcdef.tmp", "c.index"});
}

TEST_CASE("cache: damaged files are DataLoss naming them", "[ops][cache]") {
  TempDir dir;
  const std::string filename = dir.File("c");
  REQUIRE(IntsOf(Dataset::Range(5).Cache(filename)) == Ints{0, 1, 2, 3, 4});
  const std::string index = Contents(filename + ".index");
  const std::string data = Contents(filename + ".data");
  const std::string advice = "the cache '" + filename + "' is damaged; delete its files (" + filename +
                             ".*) and a later pass writes it again";
  auto read_error = [&] {
    absl::StatusOr<std::vector<Element>> read = Dataset::Range(5).Cache(filename).Collect();
    REQUIRE_FALSE(read.ok());
    CHECK(read.status().code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(read.status().message()), Catch::Matchers::EndsWith(advice));
    return std::string(read.status().message());
  };
  testing::WriteFile(filename + ".index", index.substr(0, 20));
  CHECK(read_error() == "cache: the index '" + filename + ".index' does not parse ('" + index.substr(0, 20) +
                            "'): " + advice);
  const std::string size = std::to_string(data.size());
  const std::string fingerprint = index.substr(index.find(" fingerprint="));  // with its newline
  testing::WriteFile(filename + ".index", "sluice-cache 2 elements=6 data_bytes=" + size + fingerprint);
  CHECK(read_error() ==
        "cache: '" + filename + ".data' ends after 5 elements where its index says 6: " + advice);
  testing::WriteFile(filename + ".index", "sluice-cache 2 elements=4 data_bytes=" + size + fingerprint);
  CHECK(read_error() ==
        "cache: '" + filename + ".data' holds more than the 4 elements its index says: " + advice);
  testing::WriteFile(filename + ".index", index);
  testing::WriteFile(filename + ".data", data.substr(0, data.size() - 3));
  CHECK(read_error() == "cache: '" + filename + ".data' has " + std::to_string(data.size() - 3) +
                            " bytes where its index '" + filename + ".index' says " + size + ": " + advice);
  std::string flipped = data;
  flipped[data.size() - 6] ^= 0x20;
  testing::WriteFile(filename + ".data", flipped);
  CHECK_THAT(read_error(), Catch::Matchers::StartsWith("cache: corrupt TFRecord in '" + filename + ".data'"));
  std::filesystem::remove(filename + ".data");
  CHECK_THAT(read_error(), Catch::Matchers::StartsWith("cache: '" + filename + ".data' cannot be read"));
}

TEST_CASE("cache: files that other steps wrote are refused, naming both fingerprints", "[ops][cache]") {
  TempDir dir;
  const std::string filename = dir.File("train");
  // Issue 50: another pipeline's cache of the same name read as this one's.
  REQUIRE(IntsOf(Dataset::Range(4).Map("add", {{"value", 1000000}}).Cache(filename)) ==
          Ints{1000000, 1000001, 1000002, 1000003});
  const std::string theirs =
      DatasetFingerprint(internal::DefinitionOf(Dataset::Range(4).Map("add", {{"value", 1000000}})));
  const std::string ours = DatasetFingerprint(internal::DefinitionOf(Dataset::Range(4)));
  REQUIRE(theirs != ours);
  const std::string index = Contents(filename + ".index");
  CHECK(absl::EndsWith(index, " fingerprint=" + theirs + "\n"));
  auto refusal = [&] {
    absl::StatusOr<std::vector<Element>> read = Dataset::Range(4).Cache(filename).Collect();
    REQUIRE_FALSE(read.ok());
    CHECK(read.status().code() == absl::StatusCode::kFailedPrecondition);
    return std::string(read.status().message());
  };
  const std::string fix = "): give this cache a filename of its own, or delete '" + filename +
                          ".index' and '" + filename + ".data' to write it again";
  CHECK(refusal() == "cache: '" + filename + "' holds the elements of another pipeline (fingerprint " +
                         theirs + "; the steps before this cache have fingerprint " + ours + fix);
  // An index of the first release names no pipeline: refused the same way.
  testing::WriteFile(filename + ".index", "sluice-cache 1 elements=4 data_bytes=" +
                                              std::to_string(std::filesystem::file_size(filename + ".data")) +
                                              "\n");
  CHECK(refusal() ==
        "cache: '" + filename +
            "' holds the elements of another pipeline (written without a fingerprint, by an earlier "
            "release; the steps before this cache have fingerprint " +
            ours + fix);
  // The advice followed: deleted, the files are written again, as ours.
  std::filesystem::remove(filename + ".index");
  std::filesystem::remove(filename + ".data");
  CHECK(IntsOf(Dataset::Range(4).Cache(filename)) == Ints{0, 1, 2, 3});
  CHECK(absl::EndsWith(Contents(filename + ".index"), " fingerprint=" + ours + "\n"));
  CHECK(IntsOf(Dataset::Range(4).Cache(filename).Repeat(2)) == Ints{0, 1, 2, 3, 0, 1, 2, 3});
}

TEST_CASE("cache: a memory pass past max_bytes fails", "[ops][cache]") {
  // 8 bytes an element: the 13th passes 100.
  const DatasetPtr built = MustBuild(Dataset::Range(20).Cache("", 100));
  std::unique_ptr<IteratorBase> it = MustIterate(built);
  Element element;
  bool end = false;
  for (int i = 0; i < 12; ++i) REQUIRE(it->GetNext(&element, &end).ok());
  const absl::Status status = it->GetNext(&element, &end);
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(status.message() ==
        "cache: the first pass holds more than 100 bytes (max_bytes); raise max_bytes or cache to files "
        "(filename)");
  CHECK(it->GetNext(&element, &end).code() == absl::StatusCode::kResourceExhausted);
  CHECK(IntsOf(Dataset::Range(12).Cache("", 100).Repeat(2)).size() == 24);
  CHECK(testing::BuildError(Dataset::Range(3).Cache("", -1)).message() ==
        "step 2 (cache): max_bytes must be >= 0 (0: 1 GiB), got -1");
}

TEST_CASE("cache: checkpoints restore exactly, in memory", "[ops][cache][checkpoint]") {
  // Each restore is into a new build, whose memory cache is empty: a
  // reading pass recomputes it from the (seeded) input.
  testing::CheckResumesEverywhere(Dataset::Range(12).Shuffle(5, 7).Cache().Repeat(3));
  testing::CheckResumesEverywhere(Dataset::Range(12).Shuffle(5, 7).Cache().Shuffle(4, 2).Repeat(2));
}

TEST_CASE("cache: checkpoints restore exactly, in files", "[ops][cache][checkpoint]") {
  TempDir dir;
  auto pipeline = [&](const std::string& name) {
    return Dataset::Range(12).Shuffle(5, 7).Cache(dir.File(name)).Repeat(3);
  };
  const Lines expected = testing::Uninterrupted(pipeline("expected"));
  REQUIRE(expected.size() == 36);
  // A new cache for each position: the save finds a writing pass in the
  // first epoch, and the restore goes on writing with its temp file.
  size_t caches = 1;
  for (int64_t before = 0; before <= 36; before += 1 + before / 5, ++caches) {
    const std::string name = absl::StrCat("at", before);
    testing::CheckResumesAt(pipeline(name), before, expected);
    // Whole, with no lock or temp file left.
    CHECK(std::filesystem::exists(dir.File(name + ".index")));
    CHECK_FALSE(std::filesystem::exists(dir.File(name + ".lockfile")));
  }
  CHECK(Files(dir).size() == 2 * caches);
  // The same cache for every position: restores read the files.
  testing::CheckResumesEverywhere(pipeline("shared"));
}

TEST_CASE("cache: a restored writing pass takes the lock over and writes the files",
          "[ops][cache][checkpoint]") {
  TempDir dir;
  auto calls = std::make_shared<std::atomic<int>>(0);
  const Dataset cached = Counted(Dataset::Range(10), calls).Cache(dir.File("c"));
  absl::StatusOr<Iterator> first = cached.MakeIterator();
  REQUIRE(first.ok());
  REQUIRE(testing::Read(*first, 5).size() == 5);
  absl::StatusOr<std::string> state = first->Save();
  REQUIRE(state.ok());
  absl::StatusOr<Iterator> restored = cached.MakeIterator(*state);
  REQUIRE(restored.ok());
  CHECK(testing::Read(*restored, 100) == Lines{"5", "6", "7", "8", "9"});
  // The restored pass finished the cache while the saving one, still
  // writing its own temp file, no longer holds the lock.
  const std::vector<std::string> files = Files(dir);
  REQUIRE(files.size() == 3);
  CHECK(files[0] == "c.data");
  CHECK(absl::StartsWith(files[1], "c.data."));
  CHECK(absl::EndsWith(files[1], ".tmp"));
  CHECK(files[2] == "c.index");
  CHECK(testing::Read(*first, 100).size() == 5);
  CHECK(Files(dir) == kComplete);
  CHECK(*calls == 15);  // 5 + 5 after the restore + 5 more of the saving pass
  CHECK(ReadInts(MustBuild(cached)) == Ints{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(*calls == 15);
}

TEST_CASE("cache: a restore goes on when its files are gone", "[ops][cache][checkpoint]") {
  TempDir dir;
  // The same order each pass: a pass that writes nothing leaves the next
  // to run the input again.
  const Dataset cached = Dataset::Range(10).Shuffle(4, 5, false).Cache(dir.File("c")).Repeat(2);
  const Lines expected = testing::Uninterrupted(cached);
  for (const int64_t before : {4, 13}) {
    INFO("saved after " << before);
    std::filesystem::remove_all(dir.path());
    std::filesystem::create_directories(dir.path());
    absl::StatusOr<Iterator> first = cached.MakeIterator();
    REQUIRE(first.ok());
    Lines seen = testing::Read(*first, before);
    absl::StatusOr<std::string> state = first->Save();
    REQUIRE(state.ok());
    // A writing pass's temp file, or the complete cache, deleted: the
    // restore goes on (writing nothing, or computing the cache again).
    first = absl::UnknownError("dropped");
    std::filesystem::remove_all(dir.path());
    std::filesystem::create_directories(dir.path());
    absl::StatusOr<Iterator> restored = cached.MakeIterator(*state);
    INFO(restored.status().ToString());
    REQUIRE(restored.ok());
    for (const std::string& e : testing::Read(*restored, 100)) seen.push_back(e);
    CHECK(seen == expected);
    CHECK(Files(dir) == kComplete);
  }
}

TEST_CASE("cache: YAML forms", "[ops][cache][yaml]") {
  TempDir dir;
  CHECK(testing::Yaml("pipeline:\n  - range: 3\n  - cache\n  - repeat: 2\n") ==
        Lines{"0", "1", "2", "0", "1", "2"});
  CHECK(testing::Yaml("pipeline:\n  - range: 3\n  - cache: {}\n") == Lines{"0", "1", "2"});
  CHECK(testing::Yaml("pipeline:\n  - range: 3\n  - cache: {filename: " + dir.File("c") +
                      ", max_bytes: 1000}\n  - repeat: 2\n") == Lines{"0", "1", "2", "0", "1", "2"});
  CHECK(Files(dir) == kComplete);
  CHECK(testing::YamlFingerprint("pipeline:\n  - range: 3\n  - cache: {filename: /x}\n") ==
        testing::YamlFingerprint("pipeline:\n  - range: 3\n  - cache: {filename: /x, max_bytes: 0}\n"));
}

}  // namespace
}  // namespace sluice
