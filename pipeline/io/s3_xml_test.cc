#include "pipeline/io/s3_xml.h"

#include <catch2/catch.hpp>

namespace sluice::io {
namespace {

TEST_CASE("S3 XML: a truncated ListObjectsV2 page and its continuation", "[io][s3xml]") {
  const std::string first = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>corp-data</Name><Prefix>imagenet/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>imagenet/ant/1.jpg</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>1234</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>imagenet/ant/2 &amp; 3.jpg</Key><ETag>"abc-2"</ETag><Size>0</Size></Contents>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
</ListBucketResult>)";
  absl::StatusOr<ListPage> page = ParseListObjectsV2(first);
  REQUIRE(page.ok());
  REQUIRE(page->objects.size() == 2);
  CHECK(page->objects[0].key == "imagenet/ant/1.jpg");
  CHECK(page->objects[0].size == 1234);
  CHECK(page->objects[0].etag == "9b2cf535f27731c974343645a3985328");
  CHECK(page->objects[1].key == "imagenet/ant/2 & 3.jpg");
  CHECK(page->objects[1].size == 0);
  CHECK(page->objects[1].etag == "abc-2");
  CHECK(page->truncated);
  CHECK(page->next_continuation_token == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");

  const std::string last = R"(<ListBucketResult><IsTruncated>false</IsTruncated>
  <CommonPrefixes><Prefix>imagenet/cat/</Prefix></CommonPrefixes>
  <CommonPrefixes><Prefix>imagenet/dog/</Prefix></CommonPrefixes></ListBucketResult>)";
  page = ParseListObjectsV2(last);
  REQUIRE(page.ok());
  CHECK(page->objects.empty());
  CHECK_FALSE(page->truncated);
  CHECK(page->common_prefixes == std::vector<std::string>{"imagenet/cat/", "imagenet/dog/"});
}

TEST_CASE("S3 XML: listings that cannot be trusted are refused", "[io][s3xml]") {
  CHECK(ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>")
            .status()
            .message() == "the listing is truncated but gives no NextContinuationToken");
  CHECK(ParseListObjectsV2("<Error><Code>AccessDenied</Code></Error>").status().message() ==
        "the listing is not a ListBucketResult");
  CHECK(ParseListObjectsV2(
            "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>")
            .status()
            .message() == "the listing gives key 'k' no valid Size ('-1')");
  CHECK(ParseListObjectsV2("not xml <").status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("S3 XML: error documents and ETags", "[io][s3xml]") {
  const S3Error error = ParseS3Error(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The specified key does not "
      "exist.</Message>"
      "<Key>a/b</Key></Error>");
  CHECK(error.code == "NoSuchKey");
  CHECK(error.message == "The specified key does not exist.");
  CHECK(ParseS3Error("<html>502 Bad Gateway</html>").code.empty());
  CHECK(ParseS3Error("").code.empty());
  CHECK(UnquoteEtag("\"abc\"") == "abc");
  CHECK(UnquoteEtag("W/\"abc\"") == "abc");
  CHECK(UnquoteEtag("abc") == "abc");
}

}  // namespace
}  // namespace sluice::io
