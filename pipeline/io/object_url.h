// Object URLs: `s3://BUCKET/KEY` and `http(s)://HOST[:PORT]/PATH`, the
// names every file source takes besides local paths. Parsing is strict so
// that a URL names one object and nothing else: no user info, no fragment,
// no query in an object's name.
#ifndef SLUICE_PIPELINE_IO_OBJECT_URL_H_
#define SLUICE_PIPELINE_IO_OBJECT_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::io {

enum class UrlScheme { kS3, kHttp, kHttps };

struct ObjectUrl {
  UrlScheme scheme = UrlScheme::kS3;
  // s3: the bucket; http(s): "host" or "host:port".
  std::string authority;
  // s3: the key (may be empty: a bucket's top); http(s): the path after
  // the first '/', as written (already percent-encoded where it needs to be).
  std::string key;
  // The URL as given.
  std::string text;

  bool is_s3() const { return scheme == UrlScheme::kS3; }
  // The host without a port (http(s)), for the address checks.
  std::string host() const;
};

// True when `path` starts with a scheme ("s3://", "https://", "gs://"...):
// it is not a local path, whether or not Sluice can read it.
bool HasUrlScheme(absl::string_view path);

// InvalidArgument naming the URL and what is wrong: an unknown scheme
// (gs:// says to use GCS's S3-compatible endpoint), an empty or invalid
// bucket, a host missing, user info, a fragment, or control characters.
absl::StatusOr<ObjectUrl> ParseObjectUrl(absl::string_view url);

// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters
// (A-Z a-z 0-9 - _ . ~) as they are, '/' kept when `keep_slash`, every
// other byte as %XX (upper-case hex).
std::string UriEncode(absl::string_view text, bool keep_slash);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_OBJECT_URL_H_
