// AWS Signature Version 4 for S3 requests (the Authorization header), as
// AWS's "Authenticating Requests: Using the Authorization Header" defines
// it. Our own, not libcurl's CURLOPT_AWS_SIGV4: the signer is then a pure
// function with the documented examples as its tests, and it signs the
// session token and payload hash headers the way every S3 server expects.
#ifndef SLUICE_PIPELINE_IO_SIGV4_H_
#define SLUICE_PIPELINE_IO_SIGV4_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace sluice::io {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: none
  bool empty() const { return access_key_id.empty(); }
};

struct SigV4Request {
  std::string method = "GET";
  // The path as sent, already URI-encoded ("/bucket/key%20name").
  std::string encoded_path = "/";
  // Query parameters, not yet encoded; signed sorted by name.
  std::vector<std::pair<std::string, std::string>> query;
  // Headers to sign, names in any case; Host must be among them. Signing
  // adds x-amz-date, x-amz-content-sha256 and (with a session token)
  // x-amz-security-token.
  std::map<std::string, std::string> headers;
  // Hex SHA-256 of the body ("e3b0c442..." for none), or "UNSIGNED-PAYLOAD".
  std::string payload_sha256;
};

// Lower-case hex of SHA-256(`bytes`).
std::string Sha256Hex(absl::string_view bytes);

// The canonical request and the string to sign, exposed for the tests.
std::string CanonicalRequest(const SigV4Request& request);
std::string StringToSign(const SigV4Request& request, absl::string_view amz_date, absl::string_view region,
                         absl::string_view service);

// Signs `request` at `amz_date` ("20130524T000000Z"): adds the x-amz-*
// headers to request->headers and returns the Authorization header's value.
std::string SignV4(SigV4Request* request, const AwsCredentials& credentials, absl::string_view amz_date,
                   absl::string_view region, absl::string_view service = "s3");

// The query string as sent: the parameters sorted and encoded.
std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query);

// Now in SigV4's date format (UTC).
std::string AmzDateNow();

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_SIGV4_H_
