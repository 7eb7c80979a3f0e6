#include "pipeline/io/s3_xml.h"

#include <pugixml.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::io {

std::string UnquoteEtag(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  // A weak validator (W/"...") names the same version for our purpose.
  if (etag.rfind("W/", 0) == 0) return UnquoteEtag(etag.substr(2));
  return etag;
}

absl::StatusOr<ListPage> ParseListObjectsV2(const std::string& xml) {
  pugi::xml_document document;
  const pugi::xml_parse_result parsed = document.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return absl::InvalidArgumentError(
        absl::StrCat("the listing is not XML: ", parsed.description(), " at byte ", parsed.offset));
  }
  const pugi::xml_node result = document.child("ListBucketResult");
  if (!result) return absl::InvalidArgumentError("the listing is not a ListBucketResult");
  ListPage page;
  for (pugi::xml_node contents : result.children("Contents")) {
    ListedObject object;
    object.key = contents.child_value("Key");
    if (!absl::SimpleAtoi(contents.child_value("Size"), &object.size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the listing gives key '", object.key, "' no valid Size ('", contents.child_value("Size"), "')"));
    }
    object.etag = UnquoteEtag(contents.child_value("ETag"));
    page.objects.push_back(std::move(object));
  }
  for (pugi::xml_node prefix : result.children("CommonPrefixes")) {
    page.common_prefixes.push_back(prefix.child_value("Prefix"));
  }
  page.truncated = std::string(result.child_value("IsTruncated")) == "true";
  page.next_continuation_token = result.child_value("NextContinuationToken");
  if (page.truncated && page.next_continuation_token.empty()) {
    return absl::InvalidArgumentError("the listing is truncated but gives no NextContinuationToken");
  }
  return page;
}

S3Error ParseS3Error(const std::string& xml) {
  pugi::xml_document document;
  if (!document.load_buffer(xml.data(), xml.size())) return {};
  const pugi::xml_node error = document.child("Error");
  if (!error) return {};
  return {error.child_value("Code"), error.child_value("Message")};
}

}  // namespace sluice::io
