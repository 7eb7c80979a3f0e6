#include "pipeline/io/object_storage_settings.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/testing/test_util.h"

namespace sluice::io {
namespace {

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                             "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
                             "AWS_SHARED_CREDENTIALS_FILE", "AWS_CA_BUNDLE", "HOME"}) {
      const char* old = getenv(name);
      saved_.emplace_back(name, old == nullptr ? std::optional<std::string>() : std::string(old));
      unsetenv(name);
    }
    for (const auto& [name, value] : values) setenv(name, value, 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value.has_value()) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_CASE("object storage settings: the environment, as AWS's tools read it", "[io][settings]") {
  ScopedEnv env({{"AWS_ACCESS_KEY_ID", "S3RVER"},
                 {"AWS_SECRET_ACCESS_KEY", "S3RVER"},
                 {"AWS_DEFAULT_REGION", "eu-west-3"},
                 {"AWS_ENDPOINT_URL", "http://127.0.0.1:4569/"}});
  absl::StatusOr<ObjectStorageContext> context = ResolveObjectStorage({});
  REQUIRE(context.ok());
  CHECK(context->endpoint == "http://127.0.0.1:4569");
  CHECK(context->custom_endpoint);
  CHECK(context->path_style);
  CHECK(context->region == "eu-west-3");
  CHECK(context->credentials.access_key_id == "S3RVER");
  CHECK(context->credentials_source == "environment");
  // The config section wins over the environment.
  context = ResolveObjectStorage(
      {.endpoint = "https://minio.local:9000", .region = "us-west-2", .addressing_style = "virtual"});
  REQUIRE(context.ok());
  CHECK(context->endpoint == "https://minio.local:9000");
  CHECK_FALSE(context->path_style);
  CHECK(context->region == "us-west-2");
}

TEST_CASE(
    "object storage settings: no endpoint means AWS's, virtual-hosted, and no credentials anonymous requests",
    "[io][settings]") {
  ScopedEnv env({{"AWS_REGION", "ap-south-1"}});
  absl::StatusOr<ObjectStorageContext> context = ResolveObjectStorage({});
  REQUIRE(context.ok());
  CHECK(context->endpoint == "https://s3.ap-south-1.amazonaws.com");
  CHECK_FALSE(context->path_style);
  CHECK(context->credentials.empty());
  CHECK(context->credentials_source == "none (anonymous requests)");
}

TEST_CASE("object storage settings: a credentials file and its profiles", "[io][settings]") {
  testing::TempDir dir;
  const std::string file = dir.File("credentials");
  std::ofstream(file) << "[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = SKDEFAULT\n\n"
                         "# the training jobs' role\n[profile train]\naws_access_key_id=AKTRAIN\n"
                         "aws_secret_access_key=SKTRAIN\naws_session_token=TOKEN\n";
  ScopedEnv env({{"AWS_SHARED_CREDENTIALS_FILE", file.c_str()}, {"AWS_PROFILE", "train"}});
  absl::StatusOr<ObjectStorageContext> context = ResolveObjectStorage({});
  REQUIRE(context.ok());
  CHECK(context->credentials.access_key_id == "AKTRAIN");
  CHECK(context->credentials.secret_access_key == "SKTRAIN");
  CHECK(context->credentials.session_token == "TOKEN");
  CHECK(context->credentials_source == "file " + file + " (profile train)");
  context = ResolveObjectStorage({.credentials_file = file, .profile = "default"});
  REQUIRE(context.ok());
  CHECK(context->credentials.access_key_id == "AKDEFAULT");
  CHECK(ResolveObjectStorage({.credentials_file = file, .profile = "nope"}).status().message() ==
        "object_storage.credentials_file: the credentials file '" + file + "' has no profile [nope]");
}

TEST_CASE("object storage settings: wrong settings are refused naming them", "[io][settings]") {
  ScopedEnv env({});
  CHECK(ResolveObjectStorage({.endpoint = "ftp://x"}).status().message() ==
        "object_storage.endpoint: 'ftp://x' is not an http:// or https:// URL");
  CHECK(ResolveObjectStorage({.addressing_style = "dns"}).status().message() ==
        "object_storage.addressing_style: 'dns' is neither path nor virtual");
  CHECK(ResolveObjectStorage({.credentials_file = "/nonexistent/creds"}).status().message() ==
        "object_storage.credentials_file: cannot open '/nonexistent/creds': No such file or directory");
  ScopedEnv half({{"AWS_ACCESS_KEY_ID", "AK"}});
  CHECK(ResolveObjectStorage({}).status().message() ==
        "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
}

}  // namespace
}  // namespace sluice::io
