#include "dispatcher/client_secrets.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

TEST_CASE("client_secrets: a secret is its id's, and the key in work_dir outlives a restart",
          "[dispatcher]") {
  testing::TempDir dir;
  absl::StatusOr<ClientSecrets> first = ClientSecrets::Open(dir.path());
  REQUIRE(first.ok());
  const std::string secret = first->For(7);
  CHECK(secret.size() == 32);
  CHECK(secret.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(first->For(8) != secret);
  CHECK(first->Matches(7, secret));
  CHECK_FALSE(first->Matches(8, secret));
  CHECK_FALSE(first->Matches(7, ""));
  CHECK_FALSE(first->Matches(7, secret.substr(0, 31)));
  struct stat info {};
  REQUIRE(stat(dir.File("client_secrets.key").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  CHECK(info.st_size == 32);

  absl::StatusOr<ClientSecrets> reopened = ClientSecrets::Open(dir.path());
  REQUIRE(reopened.ok());
  CHECK(reopened->For(7) == secret);
  // Another dispatcher's (or one without work_dir) knows other secrets.
  testing::TempDir other;
  CHECK(ClientSecrets::Open(other.path())->For(7) != secret);
  CHECK(ClientSecrets().For(7) != secret);
}

TEST_CASE("client_secrets: a damaged key file is an error naming it", "[dispatcher]") {
  testing::TempDir dir;
  std::ofstream(dir.File("client_secrets.key")) << "short";
  absl::StatusOr<ClientSecrets> secrets = ClientSecrets::Open(dir.path());
  CHECK(secrets.status().code() == absl::StatusCode::kDataLoss);
  CHECK(std::string(secrets.status().message()) ==
        dir.File("client_secrets.key") + ": expected 32 bytes, read 5");
}

}  // namespace
}  // namespace sluice::dispatcher
