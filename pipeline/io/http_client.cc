#include "pipeline/io/http_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sluice::io {
namespace {

std::atomic<int64_t> requests_sent{0};

// A thread's easy handle: its connection cache is what makes connections
// be reused. The handle of a process that forked is not used in the child
// (its sockets are the parent's); it is left, not cleaned up, for the same
// reason.
struct ThreadHandle {
  CURL* curl = nullptr;
  pid_t pid = 0;
  ~ThreadHandle() {
    if (curl != nullptr && pid == getpid()) curl_easy_cleanup(curl);
  }
};

CURL* HandleForThisThread() {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  thread_local ThreadHandle handle;
  if (handle.curl == nullptr || handle.pid != getpid()) {
    handle.curl = curl_easy_init();
    handle.pid = getpid();
  }
  curl_easy_reset(handle.curl);
  return handle.curl;
}

struct Transfer {
  HttpResponse* response;
  const HttpOptions* options;
  bool too_large = false;
  // The status of the answer whose body is arriving (its status line).
  long status = 0;
  size_t body_bytes = 0;  // of this transfer, wherever they went
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (transfer->body_bytes + bytes > transfer->options->max_body_bytes) {
    transfer->too_large = true;
    return 0;  // aborts the transfer
  }
  transfer->body_bytes += bytes;
  const bool success = transfer->status >= 200 && transfer->status < 300;
  std::string& body = success && transfer->options->success_body != nullptr ? *transfer->options->success_body
                                                                            : transfer->response->body;
  body.append(data, bytes);
  return bytes;
}

// "HTTP/1.1 206 Partial Content" -> 206; 0 when it is not a status line.
long StatusOf(absl::string_view status_line) {
  const size_t space = status_line.find(' ');
  long status = 0;
  if (space == absl::string_view::npos || status_line.size() < space + 4) return 0;
  for (char digit : status_line.substr(space + 1, 3)) {
    if (digit < '0' || digit > '9') return 0;
    status = status * 10 + (digit - '0');
  }
  return status;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  const absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {
    // A new answer (after a 100 Continue): its headers start afresh.
    transfer->response->headers.clear();
    transfer->status = StatusOf(line);
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    transfer->response->headers[absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return bytes;
}

bool IsLinkLocal(absl::string_view ip) {
  return absl::StartsWith(ip, "169.254.") || absl::StartsWith(absl::AsciiStrToLower(ip), "fe80:") ||
         absl::StartsWith(ip, "::ffff:169.254.") || absl::AsciiStrToLower(ip) == "fd00:ec2::254";
}

int OnConnected(void* user, char* primary_ip, char*, int, int) {
  auto* transfer = static_cast<Transfer*>(user);
  if (!transfer->options->allow_link_local && IsLinkLocal(primary_ip)) {
    transfer->response->link_local_refused = true;
    transfer->response->transport_error = primary_ip;
    return CURL_PREREQFUNC_ABORT;
  }
  return CURL_PREREQFUNC_OK;
}

}  // namespace

std::string HttpResponse::Header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

int64_t HttpRequestsSent() { return requests_sent.load(std::memory_order_relaxed); }

absl::Status HttpPerform(const HttpRequest& request, const HttpOptions& options, HttpResponse* response) {
  *response = HttpResponse{};
  CURL* curl = HandleForThisThread();
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  Transfer transfer{response, &options};
  curl_slist* headers = nullptr;
  for (const std::string& header : request.headers) headers = curl_slist_append(headers, header.c_str());
  // No "Expect: 100-continue" and no Accept header of curl's own.
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_ms));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                   std::max<long>(1, static_cast<long>(options.stall_timeout_ms / 1000)));
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
  if (!options.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options.ca_file.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_PREREQFUNCTION, OnConnected);
  curl_easy_setopt(curl, CURLOPT_PREREQDATA, &transfer);
  char error_text[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  requests_sent.fetch_add(1, std::memory_order_relaxed);
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response->status);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  if (code == CURLE_OK) return absl::OkStatus();
  if (response->link_local_refused) {
    return absl::PermissionDeniedError(absl::StrCat(
        request.method, " ", request.url, ": refused to connect to the link-local address ",
        response->transport_error,
        " (cloud metadata services answer there); a data root must name it for Sluice to fetch from it"));
  }
  response->transport_error =
      transfer.too_large ? absl::StrCat("the answer's body is larger than ", options.max_body_bytes, " bytes")
                         : (error_text[0] != '\0' ? error_text : curl_easy_strerror(code));
  return absl::UnavailableError(
      absl::StrCat(request.method, " ", request.url, ": ", response->transport_error));
}

}  // namespace sluice::io
