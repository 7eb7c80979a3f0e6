#include "pipeline/io/object_url.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice::io {
namespace {

bool ValidBucketName(absl::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '-' || c == '_')) return false;
  }
  return absl::ascii_isalnum(bucket.front()) && absl::ascii_isalnum(bucket.back());
}

}  // namespace

std::string ObjectUrl::host() const {
  if (is_s3()) return authority;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    return close == std::string::npos ? authority : authority.substr(1, close - 1);
  }
  return authority.substr(0, authority.rfind(':'));
}

bool HasUrlScheme(absl::string_view path) {
  const size_t colon = path.find("://");
  if (colon == absl::string_view::npos || colon == 0) return false;
  for (size_t i = 0; i < colon; ++i) {
    const char c = path[i];
    if (!(absl::ascii_isalnum(c) || c == '+' || c == '-' || c == '.')) return false;
  }
  return absl::ascii_isalpha(path[0]);
}

absl::StatusOr<ObjectUrl> ParseObjectUrl(absl::string_view url) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("'", url, "' is not a valid object URL: ", why));
  };
  for (char c : url) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return invalid("it holds a control character");
  }
  const size_t separator = url.find("://");
  if (separator == absl::string_view::npos) return invalid("no scheme (s3://, http:// or https://)");
  const std::string scheme = absl::AsciiStrToLower(url.substr(0, separator));
  ObjectUrl parsed;
  parsed.text = std::string(url);
  if (scheme == "s3") {
    parsed.scheme = UrlScheme::kS3;
  } else if (scheme == "http") {
    parsed.scheme = UrlScheme::kHttp;
  } else if (scheme == "https") {
    parsed.scheme = UrlScheme::kHttps;
  } else if (scheme == "gs") {
    return invalid(
        "gs:// is read through Google Cloud Storage's S3-compatible API: write s3://BUCKET/KEY and set "
        "object_storage.endpoint (or AWS_ENDPOINT_URL) to https://storage.googleapis.com");
  } else {
    return invalid(absl::StrCat("unknown scheme '", scheme, "' (valid: s3, http, https)"));
  }
  const absl::string_view rest = url.substr(separator + 3);
  const size_t slash = rest.find('/');
  parsed.authority = std::string(rest.substr(0, slash));
  parsed.key = slash == absl::string_view::npos ? "" : std::string(rest.substr(slash + 1));
  if (parsed.authority.empty()) return invalid(parsed.is_s3() ? "no bucket" : "no host");
  if (parsed.authority.find('@') != std::string::npos) {
    return invalid("user info in a URL is refused (credentials come from the daemon's environment)");
  }
  if (parsed.key.find('#') != std::string::npos) return invalid("a fragment ('#') names no object");
  if (const size_t question = parsed.key.find('?'); question != std::string::npos && !parsed.is_s3()) {
    // A presigned URL is a credential: it has no place in a pipeline that
    // travels to the dispatcher, the workers and checkpoints.
    for (absl::string_view parameter :
         absl::StrSplit(absl::string_view(parsed.key).substr(question + 1), '&')) {
      const absl::string_view name = parameter.substr(0, parameter.find('='));
      const std::string lower = absl::AsciiStrToLower(name);
      if (lower == "x-amz-credential" || lower == "x-amz-signature" || lower == "x-amz-security-token" ||
          lower == "awsaccesskeyid" || lower == "signature") {
        return invalid(
            absl::StrCat("it carries a credential (", name,
                         "); credentials come from the daemon's environment, never from a pipeline"));
      }
    }
  }
  if (parsed.is_s3()) {
    if (!ValidBucketName(parsed.authority)) {
      return invalid(absl::StrCat("'", parsed.authority,
                                  "' is not a bucket name (3 to 63 lower-case letters, digits, '.', '-')"));
    }
    if (parsed.key.find('?') != std::string::npos) return invalid("an S3 key in a URL may not hold '?'");
  }
  return parsed;
}

std::string UriEncode(absl::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace sluice::io
