#include "pipeline/io/object_client.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "pipeline/io/http_client.h"
#include "pipeline/io/object_storage_settings.h"
#include "pipeline/io/retry_policy.h"
#include "pipeline/io/sigv4.h"
#include "pipeline/sandbox.h"

namespace sluice::io {
namespace {

constexpr char kEmptyPayloadSha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr int kMaxRedirects = 5;
// The most bytes one listing page may hold (S3's pages of 1,000 keys are
// about 300 KB).
constexpr size_t kMaxListPageBytes = size_t{16} << 20;

using Context = std::shared_ptr<const ObjectStorageContext>;

struct Target {
  std::string url;   // what is sent
  std::string host;  // the Host header that is signed
  std::string path;  // encoded path, for signing
  std::vector<std::pair<std::string, std::string>> query;
};

std::string AuthorityOf(const std::string& endpoint) {
  const size_t start = endpoint.find("://") + 3;
  return endpoint.substr(start, endpoint.find('/', start) - start);
}

Target S3Target(const Context& context, const ObjectUrl& url,
                std::vector<std::pair<std::string, std::string>> query = {}) {
  Target target;
  const std::string scheme = context->endpoint.substr(0, context->endpoint.find("://"));
  const std::string authority = AuthorityOf(context->endpoint);
  if (context->path_style) {
    target.host = authority;
    target.path = absl::StrCat("/", url.authority, "/", UriEncode(url.key, true));
  } else {
    target.host = absl::StrCat(url.authority, ".", authority);
    target.path = absl::StrCat("/", UriEncode(url.key, true));
  }
  target.url = absl::StrCat(scheme, "://", target.host, target.path);
  target.query = std::move(query);
  if (!target.query.empty()) absl::StrAppend(&target.url, "?", CanonicalQuery(target.query));
  return target;
}

bool LinkLocalAllowed(const Context& context) {
  // The operator's own endpoint, or a data root, may name such an address.
  if (absl::StrContains(context->endpoint, "://169.254.")) return true;
  for (const std::string& root : CurrentPipelineSandbox().data_roots) {
    if (absl::StrContains(root, "://169.254.")) return true;
  }
  return false;
}

HttpOptions OptionsFor(const Context& context) {
  return {.connect_timeout_ms = context->connect_timeout_ms,
          .stall_timeout_ms = context->stall_timeout_ms,
          .ca_file = context->ca_file,
          .allow_link_local = LinkLocalAllowed(context)};
}

HttpRequest BuildRequest(const Context& context, const ObjectUrl& url, const std::string& method,
                         std::vector<std::pair<std::string, std::string>> query = {}) {
  HttpRequest request;
  request.method = method;
  if (!url.is_s3()) {
    request.url = url.text;
    return request;
  }
  Target target = S3Target(context, url, std::move(query));
  request.url = target.url;
  if (!context->credentials.empty()) {
    SigV4Request signing{.method = method,
                         .encoded_path = target.path,
                         .query = target.query,
                         .headers = {{"host", target.host}},
                         .payload_sha256 = kEmptyPayloadSha256};
    const std::string authorization = SignV4(&signing, context->credentials, AmzDateNow(), context->region);
    for (const auto& [name, value] : signing.headers) {
      if (name != "host") request.headers.push_back(absl::StrCat(name, ": ", value));
    }
    request.headers.push_back(absl::StrCat("Authorization: ", authorization));
  }
  return request;
}

// An answer that is not 2xx as a status naming the URL, the HTTP status
// and S3's code; `retryable` set for 5xx, 429 and 408.
AttemptResult FailedAnswer(const std::string& method, const std::string& url, const HttpResponse& response) {
  const S3Error error = ParseS3Error(response.body);
  std::string text = absl::StrCat(method, " ", url, ": HTTP ", response.status);
  if (!error.code.empty()) {
    absl::StrAppend(&text, " ", error.code);
  } else if (response.status == 404) {
    absl::StrAppend(&text, " (no such object)");  // a HEAD's answer has no body to say so
  } else if (response.status == 403) {
    absl::StrAppend(&text, " (access denied)");
  }
  if (!error.message.empty()) absl::StrAppend(&text, ": ", error.message);
  if (IsRetryableHttpStatus(response.status)) return {absl::UnavailableError(text), true};
  switch (response.status) {
    case 404:
      return {absl::NotFoundError(text), false};
    case 401:
    case 403:
      return {absl::PermissionDeniedError(text), false};
    case 412:
      return {absl::DataLossError(absl::StrCat(text, " (the object changed during the read)")), false};
    default:
      return {absl::InvalidArgumentError(text), false};
  }
}

// Performs `request` with retries, following redirects that stay inside
// the data roots. *response is the last answer, 2xx when OK. Messages name
// `shown_url`, the URL the pipeline wrote.
absl::Status PerformWithRetries(const Context& context, HttpRequest request, const HttpOptions& options,
                                HttpResponse* response, const std::string& shown_url) {
  const std::string& first_url = shown_url;
  return RetryLoop(context->retry, RetryEnvironment::Real(), [&](int) -> AttemptResult {
    for (int redirects = 0;; ++redirects) {
      absl::Status sent = HttpPerform(request, options, response);
      if (absl::IsPermissionDenied(sent)) return {sent, false};
      if (!sent.ok()) {
        return {absl::UnavailableError(
                    absl::StrCat(request.method, " ", shown_url, ": ", response->transport_error)),
                true};
      }
      if (response->status >= 300 && response->status < 400 && response->status != 304) {
        const std::string location = response->Header("location");
        if (location.empty() || redirects >= kMaxRedirects || !HasUrlScheme(location)) {
          return {absl::InvalidArgumentError(absl::StrCat(request.method, " ", first_url, ": HTTP ",
                                                          response->status, " redirect to '", location,
                                                          "' cannot be followed")),
                  false};
        }
        if (absl::Status allowed = CheckReadableUrl(location); !allowed.ok()) {
          return {absl::PermissionDeniedError(absl::StrCat(request.method, " ", first_url, " redirects to '",
                                                           location, "': ", allowed.message())),
                  false};
        }
        request.url = location;
        continue;
      }
      if (response->status >= 200 && response->status < 300) return {absl::OkStatus(), false};
      return FailedAnswer(request.method, redirects == 0 ? shown_url : request.url, *response);
    }
  });
}

// The data roots, then the address: a link-local host written as such is
// refused before any connection (one that resolves there is refused by
// the HTTP client once connected).
absl::StatusOr<Context> ContextFor(const ObjectUrl& url) {
  if (absl::Status allowed = CheckReadableUrl(url.text); !allowed.ok()) return allowed;
  absl::StatusOr<Context> context = CurrentObjectStorage();
  if (!context.ok()) return context.status();
  if (!url.is_s3() && absl::StartsWith(url.host(), "169.254.") && !LinkLocalAllowed(*context)) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", url.text,
                     "' is on a link-local address (cloud metadata services answer there); a data root must "
                     "name it for Sluice to fetch from it"));
  }
  return context;
}

}  // namespace

std::string ListingDigest(const std::vector<ObjectInfo>& objects) {
  if (objects.empty()) return "";
  std::string listed;
  for (const ObjectInfo& object : objects) absl::StrAppend(&listed, object.url, "\t", object.size, "\n");
  return Sha256Hex(listed).substr(0, 16);
}

std::string SiblingUrl(const ObjectUrl& url, const std::string& key) {
  return absl::StrCat(url.is_s3()                       ? "s3"
                      : url.scheme == UrlScheme::kHttps ? "https"
                                                        : "http",
                      "://", url.authority, "/", key);
}

absl::StatusOr<ObjectInfo> StatObject(const std::string& url_text) {
  absl::StatusOr<ObjectUrl> url = ParseObjectUrl(url_text);
  if (!url.ok()) return url.status();
  absl::StatusOr<Context> context = ContextFor(*url);
  if (!context.ok()) return context.status();
  if (url->key.empty() || absl::EndsWith(url->key, "/")) {
    return absl::InvalidArgumentError(absl::StrCat("'", url_text, "' names a folder, not an object"));
  }
  HttpResponse response;
  HttpOptions options = OptionsFor(*context);
  if (absl::Status status =
          PerformWithRetries(*context, BuildRequest(*context, *url, "HEAD"), options, &response, url_text);
      !status.ok()) {
    return status;
  }
  ObjectInfo info{.url = url_text, .etag = UnquoteEtag(response.Header("etag"))};
  if (!absl::SimpleAtoi(response.Header("content-length"), &info.size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HEAD ", url_text, ": the answer gives no Content-Length, so the object cannot be read by ranges"));
  }
  return info;
}

absl::Status ReadObjectRange(const ObjectInfo& info, uint64_t offset, uint64_t length, std::string* out) {
  out->clear();
  if (length == 0) return absl::OkStatus();
  absl::StatusOr<ObjectUrl> url = ParseObjectUrl(info.url);
  if (!url.ok()) return url.status();
  absl::StatusOr<Context> context = ContextFor(*url);
  if (!context.ok()) return context.status();
  out->reserve(length);
  return RetryLoop((*context)->retry, RetryEnvironment::Real(), [&](int) -> AttemptResult {
    const uint64_t from = offset + out->size();
    HttpRequest request = BuildRequest(*context, *url, "GET");
    request.headers.push_back(absl::StrCat("Range: bytes=", from, "-", offset + length - 1));
    HttpOptions options = OptionsFor(*context);
    options.max_body_bytes = length - out->size();
    // The body lands in *out itself: the one copy from curl's buffer.
    options.success_body = out;
    const size_t had = out->size();
    HttpResponse response;
    const absl::Status sent = HttpPerform(request, options, &response);
    if (absl::IsPermissionDenied(sent)) return {sent, false};
    if (response.status != 206 && response.status != 200) {
      out->resize(had);  // a 204's or another 2xx's body, if any
      if (!sent.ok()) {
        return {absl::UnavailableError(absl::StrCat("GET ", info.url, ": ", response.transport_error)), true};
      }
      if (response.status >= 300 && response.status < 400) {
        return {absl::InvalidArgumentError(absl::StrCat("GET ", info.url, ": HTTP ", response.status,
                                                        ": ranged reads do not follow redirects")),
                false};
      }
      return FailedAnswer("GET", info.url, response);
    }
    if (response.status == 200 && (from != 0 || length != info.size)) {
      out->resize(had);
      return {absl::FailedPreconditionError(
                  absl::StrCat("GET ", info.url, ": the server ignores Range (HTTP 200 for bytes=", from, "-",
                               offset + length - 1, "), so it cannot be read in parts")),
              false};
    }
    const std::string etag = UnquoteEtag(response.Header("etag"));
    if (!info.etag.empty() && !etag.empty() && etag != info.etag) {
      out->resize(had);
      return {absl::DataLossError(absl::StrCat("'", info.url, "' changed during the read: its ETag was ",
                                               info.etag, " and is now ", etag, " (at byte ", from, ")")),
              false};
    }
    if (!sent.ok()) {
      // A cut body: resumed from what arrived.
      return {absl::UnavailableError(absl::StrCat("GET ", info.url, ": ", response.transport_error,
                                                  " at byte ", offset + out->size())),
              true};
    }
    if (out->size() < length) {
      return {absl::UnavailableError(absl::StrCat("GET ", info.url, ": the answer ended at byte ",
                                                  offset + out->size(), " of ", offset + length)),
              true};
    }
    return {absl::OkStatus(), false};
  });
}

absl::StatusOr<std::vector<ObjectInfo>> ListObjects(const std::string& prefix_url) {
  absl::StatusOr<ObjectUrl> url = ParseObjectUrl(prefix_url);
  if (!url.ok()) return url.status();
  if (!url->is_s3()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", prefix_url, "': an http(s) server has no listing; name its files one by one (or use s3://)"));
  }
  absl::StatusOr<Context> context = ContextFor(*url);
  if (!context.ok()) return context.status();
  std::vector<ObjectInfo> objects;
  std::string token;
  ObjectUrl bucket = *url;
  bucket.key.clear();
  // A listing is held whole (a pipeline's files): bounded, so that a prefix
  // of many millions of keys cannot take a daemon's memory.
  const int64_t max_objects = (*context)->max_listed_objects;
  while (true) {
    std::vector<std::pair<std::string, std::string>> query = {{"list-type", "2"}, {"prefix", url->key}};
    if (!token.empty()) query.emplace_back("continuation-token", token);
    HttpResponse response;
    HttpOptions options = OptionsFor(*context);
    options.max_body_bytes = kMaxListPageBytes;
    if (absl::Status status =
            PerformWithRetries(*context, BuildRequest(*context, bucket, "GET", std::move(query)), options,
                               &response, prefix_url);
        !status.ok()) {
      return status;
    }
    absl::StatusOr<ListPage> page = ParseListObjectsV2(response.body);
    if (!page.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("listing '", prefix_url, "': ", page.status().message()));
    for (ListedObject& object : page->objects) {
      if (absl::EndsWith(object.key, "/")) continue;
      if (static_cast<int64_t>(objects.size()) >= max_objects) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "listing '", prefix_url, "' holds more than ", max_objects,
            " objects (object_storage.max_listed_objects): list a narrower prefix, or pack the objects into "
            "shards (tfrecord, webdataset)"));
      }
      objects.push_back({SiblingUrl(*url, object.key), object.size, std::move(object.etag)});
    }
    if (!page->truncated) {
      std::sort(objects.begin(), objects.end(),
                [](const ObjectInfo& a, const ObjectInfo& b) { return a.url < b.url; });
      return objects;
    }
    token = page->next_continuation_token;
  }
}

}  // namespace sluice::io
