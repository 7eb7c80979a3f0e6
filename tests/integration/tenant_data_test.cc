// Issue 50, findings 1 and 2, against real daemons: each tenant reads under
// the daemon's shared data_roots and its own, never another tenant's, and
// writes its file caches in a directory of its own, so that no tenant
// reads or poisons another's cache.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sluice/dataset.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/security_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::ScopedClientSecurity;
using testing::TestCluster;

const ChannelSecurity kAlice{.token = "token-of-alice-0123456789"};
const ChannelSecurity kBob{.token = "token-of-bob-0123456789"};

// dir/shared (the daemons' data_roots), dir/alice and dir/bob (each
// tenant's own), and dir/cache (the workers' cache_dir).
class TenantFiles {
 public:
  TenantFiles() {
    for (const char* folder : {"shared", "alice", "bob", "cache"}) {
      std::filesystem::create_directories(dir_.File(folder));
    }
    testing::WriteFile(dir_.File("shared/s.txt"), "shared-1\n");
    testing::WriteFile(dir_.File("alice/a.txt"), "alice-1\nalice-2\n");
    testing::WriteFile(dir_.File("bob/b.txt"), "bob-secret-1\n");
  }

  std::string File(const std::string& name) const { return dir_.File(name); }
  std::string Canonical(const std::string& name) const {
    return std::filesystem::canonical(dir_.File(name)).string();
  }

  // Tenants alice and bob, each with its own root; both daemons share
  // dir/shared and the workers write caches under dir/cache. Without
  // `roots`, only alice has a root, and nothing is shared.
  TestCluster Start(bool roots = true) const {
    std::vector<std::string> flags = testing::TokenFlags(dir_);
    flags.resize(2);  // the cluster token; no single client token
    for (const std::string tenant : {"alice", "bob"}) {
      const std::string file = dir_.File(tenant + ".token");
      testing::WriteFile(file, "token-of-" + tenant + "-0123456789\n");
      std::filesystem::permissions(file, std::filesystem::perms::owner_read);
      const bool rooted = roots || tenant == "alice";
      flags.insert(flags.end(),
                   {"--auth-clients", absl::StrCat("name=", tenant, ",token_file=", file,
                                                   rooted ? ",data_roots=" + dir_.File(tenant) : "")});
    }
    if (roots) flags.insert(flags.end(), {"--data-roots", dir_.File("shared")});
    std::vector<std::string> worker_flags = flags;
    worker_flags.insert(worker_flags.end(), {"--cache-dir", dir_.File("cache")});
    ScopedClientSecurity as_cluster({.token = testing::kClusterToken});
    return TestCluster({.num_workers = 1, .dispatcher_args = flags, .worker_args = worker_flags});
  }

 private:
  testing::TempDir dir_;
};

absl::Status ReadAs(const ChannelSecurity& tenant, const Dataset& dataset, const TestCluster& cluster,
                    std::vector<std::string>* lines) {
  ScopedClientSecurity as(tenant);
  return testing::ReadLines(dataset.ReadFromService({.service = cluster.ServiceUrl()}), lines);
}

TEST_CASE("tenants round two: a tenant reads its own roots and the shared ones, never another's",
          "[service][security][tenants]") {
  TenantFiles files;
  TestCluster cluster = files.Start();
  std::vector<std::string> lines;
  REQUIRE(ReadAs(kAlice, Dataset::TextLine({files.File("alice/a.txt"), files.File("shared/s.txt")}), cluster,
                 &lines)
              .ok());
  CHECK(lines == std::vector<std::string>{"alice-1", "alice-2", "shared-1"});

  // Her own and the shared files, listed and read in parallel on the
  // pipeline's own threads, which carry her sandbox.
  const auto listing = [&](std::vector<std::string> patterns) {
    return Dataset::ListFiles(std::move(patterns), /*shuffle=*/false)
        .Interleave(Dataset::TextLine({}), /*cycle_length=*/2, /*block_length=*/1, /*num_parallel_calls=*/2);
  };
  lines.clear();
  REQUIRE(
      ReadAs(kAlice, listing({files.File("alice/*.txt"), files.File("shared/*.txt")}), cluster, &lines).ok());
  std::sort(lines.begin(), lines.end());
  CHECK(lines == std::vector<std::string>{"alice-1", "alice-2", "shared-1"});

  // Bob's file by name, through '..', through a symlink in her folder, and
  // a listing over every folder: refused, naming the path and alice's
  // roots, and quoting nothing of the file.
  std::filesystem::create_symlink(files.File("bob/b.txt"), files.File("alice/link.txt"));
  const std::string alice_roots =
      absl::StrCat("for tenant 'alice' (", files.Canonical("shared"), ", ", files.Canonical("alice"), ")");
  const std::vector<std::pair<Dataset, std::string>> attacks = {
      {Dataset::TextLine({files.File("bob/b.txt")}), files.File("bob/b.txt")},
      {Dataset::TextLine({files.File("alice/../bob/b.txt")}), files.File("alice/../bob/b.txt")},
      {Dataset::TextLine({files.File("alice/link.txt")}), files.Canonical("bob/b.txt")},
      {listing({files.File("*/*.txt")}), files.File("")},
  };
  for (const auto& [attack, named] : attacks) {
    lines.clear();
    const absl::Status refused = ReadAs(kAlice, attack, cluster, &lines);
    INFO(refused.ToString());
    CHECK(refused.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(refused.message()),
               Contains(named) && Contains("is outside the data roots of") && Contains(alice_roots));
    CHECK_THAT(std::string(refused.message()), !Contains("bob-secret"));
    CHECK(std::find(lines.begin(), lines.end(), "bob-secret-1") == lines.end());
  }

  // The cluster token is no tenant's: its file reads are refused, saying
  // whose token to use.
  lines.clear();
  const absl::Status as_cluster = ReadAs({.token = testing::kClusterToken},
                                         Dataset::TextLine({files.File("shared/s.txt")}), cluster, &lines);
  CHECK(as_cluster.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(
      std::string(as_cluster.message()),
      Contains("reads files only for a tenant (auth.clients), under that tenant's data roots, and this "
               "read is for none: run the pipeline with a tenant's token"));

  // Bob reads his own; alice's are refused to him.
  lines.clear();
  REQUIRE(ReadAs(kBob, Dataset::TextLine({files.File("bob/b.txt")}), cluster, &lines).ok());
  CHECK(lines == std::vector<std::string>{"bob-secret-1"});
  lines.clear();
  const absl::Status bob_follows =
      ReadAs(kBob, Dataset::TextLine({files.File("alice/a.txt")}), cluster, &lines);
  CHECK(bob_follows.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(bob_follows.message()), Contains("alice/a.txt'") && Contains("for tenant 'bob'"));
}

TEST_CASE("tenants round two: file caches are per tenant: the same name is two caches, each owner-only",
          "[service][security][tenants]") {
  TenantFiles files;
  TestCluster cluster = files.Start();
  auto read = [&](const ChannelSecurity& tenant, const Dataset& dataset, std::vector<int64_t>* values) {
    ScopedClientSecurity as(tenant);
    return testing::ReadToEnd(dataset.ReadFromService({.service = cluster.ServiceUrl()}), values);
  };
  // Alice caches her squares as "train"; bob's honest "train" is his own.
  std::vector<int64_t> squares;
  REQUIRE(read(kAlice, Dataset::Range(40).Map("square").Cache("train"), &squares).ok());
  CHECK(squares.at(39) == 39 * 39);
  std::vector<int64_t> plain;
  REQUIRE(read(kBob, Dataset::Range(40).Cache("train"), &plain).ok());
  std::vector<int64_t> expected(40);
  for (int64_t i = 0; i < 40; ++i) expected[i] = i;
  CHECK(plain == expected);
  // Read again, each from its own complete cache.
  plain.clear();
  REQUIRE(read(kBob, Dataset::Range(40).Cache("train"), &plain).ok());
  CHECK(plain == expected);
  for (const char* tenant : {"alice", "bob"}) {
    const std::string data = files.File(absl::StrCat("cache/tenants/", tenant, "/train.data"));
    INFO(data);
    REQUIRE(std::filesystem::exists(data));
    CHECK((std::filesystem::status(data).permissions() & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
    CHECK((std::filesystem::status(std::filesystem::path(data).parent_path()).permissions() &
           std::filesystem::perms::all) == std::filesystem::perms::owner_all);
  }
  // Alice cannot name bob's cache, to read it or to write over it.
  std::vector<std::string> lines;
  const absl::Status as_file =
      ReadAs(kAlice, Dataset::TextLine({files.File("cache/tenants/bob/train.index")}), cluster, &lines);
  CHECK(as_file.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(as_file.message()), Contains("is outside the data roots of"));
  std::vector<int64_t> values;
  const absl::Status as_cache = read(kAlice, Dataset::Range(3).Cache("../bob/poison"), &values);
  CHECK(as_cache.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(as_cache.message()), Contains("is outside the cache_dir of") &&
                                                  Contains("for tenant 'alice'") &&
                                                  Contains(files.Canonical("cache/tenants/alice")));
  CHECK_FALSE(std::filesystem::exists(files.File("cache/tenants/bob/poison.data")));
}

TEST_CASE("tenants round two: a tenant without data roots on a daemon of several reads no files",
          "[service][security][tenants]") {
  TenantFiles files;
  TestCluster cluster = files.Start(/*roots=*/false);
  std::vector<std::string> lines;
  REQUIRE(ReadAs(kAlice, Dataset::TextLine({files.File("alice/a.txt")}), cluster, &lines).ok());
  CHECK(lines == std::vector<std::string>{"alice-1", "alice-2"});
  // No roots is no files, not every path: alice's file, and bob's own.
  for (const std::string& path : {files.File("alice/a.txt"), files.File("bob/b.txt")}) {
    lines.clear();
    const absl::Status refused = ReadAs(kBob, Dataset::TextLine({path}), cluster, &lines);
    INFO(refused.ToString());
    CHECK(refused.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(
        std::string(refused.message()),
        Contains("'" + path + "': ") &&
            Contains(" for tenant 'bob' has no data roots, so file sources read nothing (on a daemon of "
                     "several tenants no roots means none, not every path): give the tenant data_roots "
                     "in its auth.clients entry, or the daemon data_roots that every tenant shares"));
    CHECK_THAT(std::string(refused.message()), !Contains("alice-1") && !Contains("bob-secret"));
    CHECK(lines.empty());
  }
  // What reads no file still runs for bob.
  ScopedClientSecurity as_bob(kBob);
  std::vector<int64_t> values;
  absl::StatusOr<Iterator> range =
      Dataset::Range(4).ReadFromService({.service = cluster.ServiceUrl()}).MakeIterator();
  REQUIRE(range.ok());
  testing::Take(*range, -1, &values);
  CHECK(values == std::vector<int64_t>{0, 1, 2, 3});
}

}  // namespace
}  // namespace sluice
