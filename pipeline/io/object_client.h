// The object-storage operations file sources need: stat (HEAD), a byte
// range (GET with Range), and a listing (S3 ListObjectsV2), for s3:// and
// http(s):// URLs. Each request is signed with SigV4 when the process has
// credentials, retried with backoff on 5xx, 429, timeouts and resets, and
// resumed by Range from the last byte received when a body is cut. Client
// errors fail at once naming the URL, the HTTP status and S3's error code.
// Every URL is checked against the data roots first (pipeline/sandbox.h),
// and so is every redirect's target.
#ifndef SLUICE_PIPELINE_IO_OBJECT_CLIENT_H_
#define SLUICE_PIPELINE_IO_OBJECT_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/io/object_url.h"
#include "pipeline/io/s3_xml.h"

namespace sluice::io {

struct ObjectInfo {
  std::string url;
  uint64_t size = 0;
  std::string etag;  // may be empty (an HTTP server that gives none)
};

// HEAD: the object's size and ETag. NotFound, PermissionDenied or
// InvalidArgument naming the URL and the HTTP status.
absl::StatusOr<ObjectInfo> StatObject(const std::string& url);

// Reads [offset, offset + length) of the object into *out (replacing it).
// DataLoss naming the URL when the object's ETag is no longer info.etag
// (it changed during the read).
absl::Status ReadObjectRange(const ObjectInfo& info, uint64_t offset, uint64_t length, std::string* out);

// Every object whose key starts with the URL's key (s3:// only), sorted by
// key; keys ending in '/' (folder markers) left out. InvalidArgument for
// an http(s) URL: a web server has no listing.
absl::StatusOr<std::vector<ObjectInfo>> ListObjects(const std::string& prefix_url);

// A short digest (16 hex digits) of the objects' URLs and sizes, in their
// order: what a restore's split layout compares. Empty for no objects.
std::string ListingDigest(const std::vector<ObjectInfo>& objects);

// The URL of `key` in the bucket of `url` (s3) or on its host (http).
std::string SiblingUrl(const ObjectUrl& url, const std::string& key);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_OBJECT_CLIENT_H_
