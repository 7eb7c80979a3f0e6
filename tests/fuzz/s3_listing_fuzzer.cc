// What an object store answers is untrusted input too: S3's XML
// (pipeline/io/s3_xml.h), a ListObjectsV2 page or an error document, from
// any bytes: a page, or InvalidArgument saying why not; never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/io/s3_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string xml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sluice::io::ListPage> page = sluice::io::ParseListObjectsV2(xml);
  if (page.ok() && page->truncated && page->next_continuation_token.empty()) __builtin_trap();
  (void)sluice::io::ParseS3Error(xml);
  (void)sluice::io::UnquoteEtag(xml);
  return 0;
}
