#include "pipeline/io/sigv4.h"

#include <catch2/catch.hpp>

namespace sluice::io {
namespace {

// The examples of AWS's "Signature Calculations for the Authorization
// Header: Transferring Payload in a Single Chunk" (Amazon S3 API
// Reference): bucket examplebucket, 24 May 2013, us-east-1.
const AwsCredentials kExampleCredentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                         ""};
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kExampleDate[] = "20130524T000000Z";

TEST_CASE("SigV4 signs AWS's GET Object example exactly", "[io][sigv4]") {
  SigV4Request request{.method = "GET",
                       .encoded_path = "/test.txt",
                       .headers = {{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}},
                       .payload_sha256 = kEmptySha256};
  const std::string authorization = SignV4(&request, kExampleCredentials, kExampleDate, "us-east-1");
  CHECK(CanonicalRequest(request) ==
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
        "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
        "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(StringToSign(request, kExampleDate, "us-east-1", "s3") ==
        "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
        "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  CHECK(authorization ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  CHECK(request.headers.at("x-amz-date") == kExampleDate);
  CHECK(request.headers.at("x-amz-content-sha256") == kEmptySha256);
}

TEST_CASE("SigV4 signs AWS's GET Bucket lifecycle example (a query parameter without a value)",
          "[io][sigv4]") {
  SigV4Request request{.method = "GET",
                       .encoded_path = "/",
                       .query = {{"lifecycle", ""}},
                       .headers = {{"Host", "examplebucket.s3.amazonaws.com"}},
                       .payload_sha256 = kEmptySha256};
  CHECK(SignV4(&request, kExampleCredentials, kExampleDate, "us-east-1") ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
        "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST_CASE("SigV4 signs AWS's List Objects example (query parameters sorted and encoded)", "[io][sigv4]") {
  SigV4Request request{.method = "GET",
                       .encoded_path = "/",
                       .query = {{"prefix", "J"}, {"max-keys", "2"}},
                       .headers = {{"Host", "examplebucket.s3.amazonaws.com"}},
                       .payload_sha256 = kEmptySha256};
  CHECK(SignV4(&request, kExampleCredentials, kExampleDate, "us-east-1") ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
        "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
  CHECK(CanonicalQuery(request.query) == "max-keys=2&prefix=J");
}

TEST_CASE("SigV4 signs AWS's PUT Object example (payload hash, Date and a storage class)", "[io][sigv4]") {
  SigV4Request request{.method = "PUT",
                       .encoded_path = "/test%24file.text",
                       .headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                                   {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                                   {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                       .payload_sha256 = Sha256Hex("Welcome to Amazon S3.")};
  CHECK(request.payload_sha256 == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  CHECK(SignV4(&request, kExampleCredentials, kExampleDate, "us-east-1") ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"
        "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST_CASE("SigV4 signs a session token and folds header whitespace", "[io][sigv4]") {
  SigV4Request request{.method = "HEAD",
                       .encoded_path = "/b/k",
                       .headers = {{"HOST", "  127.0.0.1:9000  "}, {"X-Custom", "a   b\tc"}},
                       .payload_sha256 = kEmptySha256};
  const std::string authorization = SignV4(&request, {"AK", "SK", "TOKEN"}, "20240101T120000Z", "eu-west-1");
  CHECK(request.headers.at("x-amz-security-token") == "TOKEN");
  CHECK(CanonicalRequest(request).find("host:127.0.0.1:9000\nx-amz-content-sha256:") != std::string::npos);
  CHECK(CanonicalRequest(request).find("x-custom:a b c\n") != std::string::npos);
  const std::string prefix =
      "AWS4-HMAC-SHA256 "
      "Credential=AK/20240101/eu-west-1/s3/aws4_request,SignedHeaders=host;x-amz-content-sha256;"
      "x-amz-date;x-amz-security-token;x-custom,Signature=";
  REQUIRE(authorization.size() == prefix.size() + 64);
  CHECK(authorization.substr(0, prefix.size()) == prefix);
}

}  // namespace
}  // namespace sluice::io
