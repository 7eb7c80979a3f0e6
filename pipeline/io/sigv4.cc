#include "pipeline/io/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "pipeline/io/object_url.h"

namespace sluice::io {
namespace {

std::string Hex(const unsigned char* bytes, size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

std::string Hmac(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &size);
  return std::string(reinterpret_cast<const char*>(out), size);
}

// Header names lower-cased, values trimmed with inner runs of spaces made
// one, as the canonical form wants.
std::map<std::string, std::string> CanonicalHeaders(const std::map<std::string, std::string>& headers) {
  std::map<std::string, std::string> canonical;
  for (const auto& [name, value] : headers) {
    std::string folded;
    bool space = false;
    for (char c : absl::StripAsciiWhitespace(value)) {
      if (c == ' ' || c == '\t') {
        space = true;
        continue;
      }
      if (space) folded.push_back(' ');
      space = false;
      folded.push_back(c);
    }
    canonical[absl::AsciiStrToLower(name)] = folded;
  }
  return canonical;
}

std::string SignedHeaderNames(const std::map<std::string, std::string>& canonical) {
  std::vector<std::string> names;
  for (const auto& entry : canonical) names.push_back(entry.first);
  return absl::StrJoin(names, ";");
}

std::string Scope(absl::string_view amz_date, absl::string_view region, absl::string_view service) {
  return absl::StrCat(amz_date.substr(0, 8), "/", region, "/", service, "/aws4_request");
}

}  // namespace

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return Hex(digest, sizeof(digest));
}

std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  for (const auto& [name, value] : query)
    encoded.emplace_back(UriEncode(name, false), UriEncode(value, false));
  std::sort(encoded.begin(), encoded.end());
  std::vector<std::string> parts;
  for (const auto& [name, value] : encoded) parts.push_back(absl::StrCat(name, "=", value));
  return absl::StrJoin(parts, "&");
}

std::string CanonicalRequest(const SigV4Request& request) {
  const std::map<std::string, std::string> headers = CanonicalHeaders(request.headers);
  std::string lines;
  for (const auto& [name, value] : headers) absl::StrAppend(&lines, name, ":", value, "\n");
  return absl::StrCat(request.method, "\n", request.encoded_path, "\n", CanonicalQuery(request.query), "\n",
                      lines, "\n", SignedHeaderNames(headers), "\n", request.payload_sha256);
}

std::string StringToSign(const SigV4Request& request, absl::string_view amz_date, absl::string_view region,
                         absl::string_view service) {
  return absl::StrCat("AWS4-HMAC-SHA256\n", amz_date, "\n", Scope(amz_date, region, service), "\n",
                      Sha256Hex(CanonicalRequest(request)));
}

std::string SignV4(SigV4Request* request, const AwsCredentials& credentials, absl::string_view amz_date,
                   absl::string_view region, absl::string_view service) {
  request->headers["x-amz-date"] = std::string(amz_date);
  request->headers["x-amz-content-sha256"] = request->payload_sha256;
  if (!credentials.session_token.empty())
    request->headers["x-amz-security-token"] = credentials.session_token;
  const std::string date_key =
      Hmac(absl::StrCat("AWS4", credentials.secret_access_key), amz_date.substr(0, 8));
  const std::string signing_key = Hmac(Hmac(Hmac(date_key, region), service), "aws4_request");
  const std::string signature = Hmac(signing_key, StringToSign(*request, amz_date, region, service));
  return absl::StrCat(
      "AWS4-HMAC-SHA256 Credential=", credentials.access_key_id, "/", Scope(amz_date, region, service),
      ",SignedHeaders=", SignedHeaderNames(CanonicalHeaders(request->headers)),
      ",Signature=", Hex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size()));
}

std::string AmzDateNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

}  // namespace sluice::io
