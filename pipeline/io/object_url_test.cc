#include "pipeline/io/object_url.h"

#include <catch2/catch.hpp>

#include "pipeline/sandbox.h"

namespace sluice::io {
namespace {

TEST_CASE("object URLs: s3 and http(s) parse into their parts", "[io][url]") {
  absl::StatusOr<ObjectUrl> s3 = ParseObjectUrl("s3://corp-data/imagenet/train/0001.tfrecord");
  REQUIRE(s3.ok());
  CHECK(s3->is_s3());
  CHECK(s3->authority == "corp-data");
  CHECK(s3->key == "imagenet/train/0001.tfrecord");
  absl::StatusOr<ObjectUrl> bucket = ParseObjectUrl("s3://corp-data");
  REQUIRE(bucket.ok());
  CHECK(bucket->key.empty());
  absl::StatusOr<ObjectUrl> https = ParseObjectUrl("https://127.0.0.1:8443/sets/a%20b.txt");
  REQUIRE(https.ok());
  CHECK(https->scheme == UrlScheme::kHttps);
  CHECK(https->authority == "127.0.0.1:8443");
  CHECK(https->host() == "127.0.0.1");
  CHECK(https->key == "sets/a%20b.txt");
  CHECK(ParseObjectUrl("http://[::1]:80/x")->host() == "::1");
}

TEST_CASE("object URLs: what is refused, and why", "[io][url]") {
  CHECK(
      ParseObjectUrl("gs://b/k").status().message() ==
      "'gs://b/k' is not a valid object URL: gs:// is read through Google Cloud Storage's S3-compatible API: "
      "write s3://BUCKET/KEY and set object_storage.endpoint (or AWS_ENDPOINT_URL) to "
      "https://storage.googleapis.com");
  CHECK(ParseObjectUrl("ftp://h/k").status().message() ==
        "'ftp://h/k' is not a valid object URL: unknown scheme 'ftp' (valid: s3, http, https)");
  CHECK(ParseObjectUrl("s3:///key").status().message() == "'s3:///key' is not a valid object URL: no bucket");
  CHECK(
      ParseObjectUrl("s3://Bad_Bucket/k").status().message() ==
      "'s3://Bad_Bucket/k' is not a valid object URL: 'Bad_Bucket' is not a bucket name (3 to 63 lower-case "
      "letters, digits, '.', '-')");
  CHECK(ParseObjectUrl("https://AKIA:secret@host/k").status().message() ==
        "'https://AKIA:secret@host/k' is not a valid object URL: user info in a URL is refused (credentials "
        "come "
        "from the daemon's environment)");
  CHECK(ParseObjectUrl("https://h/a?X-Amz-Signature=abc").status().message() ==
        "'https://h/a?X-Amz-Signature=abc' is not a valid object URL: it carries a credential "
        "(X-Amz-Signature); "
        "credentials come from the daemon's environment, never from a pipeline");
  CHECK(ParseObjectUrl("https://h/a#frag").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ParseObjectUrl("s3://bucket/a\nb").status().message() ==
        "'s3://bucket/a\nb' is not a valid object URL: it holds a control character");
  CHECK(HasUrlScheme("s3://b/k"));
  CHECK(HasUrlScheme("https://h/"));
  CHECK_FALSE(HasUrlScheme("/data/s3://x"));
  CHECK_FALSE(HasUrlScheme("relative/file.txt"));
}

TEST_CASE("object URLs: SigV4's URI encoding", "[io][url]") {
  CHECK(UriEncode("a b/c+d~e_f.g-h", true) == "a%20b/c%2Bd~e_f.g-h");
  CHECK(UriEncode("a/b", false) == "a%2Fb");
  CHECK(UriEncode("\xc3\xa9", true) == "%C3%A9");
}

class ScopedRoots {
 public:
  explicit ScopedRoots(std::vector<std::string> roots) {
    absl::StatusOr<std::vector<std::string>> canonical = CanonicalDataRoots(roots);
    REQUIRE(canonical.ok());
    SetPipelineSandbox({.enabled = true, .data_roots = *canonical, .owner = "worker w:1"});
  }
  ~ScopedRoots() { SetPipelineSandbox({}); }
};

TEST_CASE("object URLs: data roots are URL prefixes of whole segments", "[io][url][sandbox]") {
  absl::StatusOr<std::vector<std::string>> canonical =
      CanonicalDataRoots({"s3://corp-data/imagenet", "https://cdn.example.com/sets/"});
  REQUIRE(canonical.ok());
  CHECK(*canonical == std::vector<std::string>{"s3://corp-data/imagenet/", "https://cdn.example.com/sets/"});
  CHECK(CanonicalDataRoots({"s3://NO/"}).status().message().substr(0, 12) == "data_roots: ");

  ScopedRoots roots({"s3://corp-data/imagenet/", "https://cdn.example.com/sets/"});
  CHECK(CheckReadableUrl("s3://corp-data/imagenet/train/0.tfrecord").ok());
  CHECK(CheckReadablePath("https://cdn.example.com/sets/a.txt").ok());
  const absl::Status outside = CheckReadablePath("s3://corp-data/imagenet-private/0.tfrecord");
  CHECK(outside.code() == absl::StatusCode::kPermissionDenied);
  CHECK(outside.message() ==
        "'s3://corp-data/imagenet-private/0.tfrecord' is outside the data roots of worker w:1 "
        "(s3://corp-data/imagenet/, https://cdn.example.com/sets/): file sources read only under data_roots");
  CHECK(CheckReadableUrl("s3://corp-data/imagenet/../secret/k").code() ==
        absl::StatusCode::kPermissionDenied);
  CHECK(CheckReadableUrl("https://cdn.example.com.evil.org/sets/a").code() ==
        absl::StatusCode::kPermissionDenied);
  CHECK(CheckReadableUrl("http://169.254.169.254/latest/meta-data/").code() ==
        absl::StatusCode::kPermissionDenied);
  // A local path is judged against the local roots: none here.
  CHECK(CheckReadablePath("/etc/passwd").code() == absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace sluice::io
