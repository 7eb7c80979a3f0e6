// S3's XML answers, read with pugixml: a ListObjectsV2 page, and the
// error document every failed request carries (its Code and Message go
// into Sluice's errors).
#ifndef SLUICE_PIPELINE_IO_S3_XML_H_
#define SLUICE_PIPELINE_IO_S3_XML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::io {

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // without its quotes
};

struct ListPage {
  std::vector<ListedObject> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_continuation_token;
};

// InvalidArgument when `xml` is not a ListBucketResult, or a truncated
// page has no continuation token (a listing would never end).
absl::StatusOr<ListPage> ParseListObjectsV2(const std::string& xml);

struct S3Error {
  std::string code;     // "NoSuchKey"; empty when the body is not an S3 error
  std::string message;  // "The specified key does not exist."
};
S3Error ParseS3Error(const std::string& xml);

// An ETag as a header or XML gives it, without quotes.
std::string UnquoteEtag(std::string etag);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_S3_XML_H_
