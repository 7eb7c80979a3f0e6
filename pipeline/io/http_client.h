// One HTTP request over libcurl, with what object storage needs around it:
// connections kept per thread and reused (a forked child starts its own),
// connect and stall timeouts, a bound on the body held, a CA file, and
// never a connection to a link-local address (169.254.0.0/16, where cloud
// metadata services answer) unless the caller allows it. Redirects are not
// followed here: the caller checks where they lead first.
#ifndef SLUICE_PIPELINE_IO_HTTP_CLIENT_H_
#define SLUICE_PIPELINE_IO_HTTP_CLIENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sluice::io {

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
};

struct HttpOptions {
  int64_t connect_timeout_ms = 10000;
  // A transfer with no byte for this long is cut (a stalled server).
  int64_t stall_timeout_ms = 30000;
  std::string ca_file;
  bool allow_link_local = false;
  // The most body bytes kept; more is a transport error ("body larger").
  size_t max_body_bytes = size_t{64} << 20;
  // When set, a 2xx answer's body is appended here (a part's own buffer:
  // no copy between the transfer and its reader), not to response->body;
  // other answers' bodies (S3's error XML) still go to response->body.
  std::string* success_body = nullptr;
};

struct HttpResponse {
  long status = 0;
  // Names lower-cased; the last value of a repeated header.
  std::map<std::string, std::string> headers;
  std::string body;
  // What curl said when the transfer failed ("" when it did not).
  std::string transport_error;
  bool link_local_refused = false;

  std::string Header(const std::string& lower_name) const;
};

// Performs `request`. OK when an HTTP answer came whole, whatever its
// status; Unavailable (a connect failure, a reset, a stall, a body cut
// short) with what arrived of the answer in *response, so that the caller
// can resume by Range; PermissionDenied for a link-local address refused.
absl::Status HttpPerform(const HttpRequest& request, const HttpOptions& options, HttpResponse* response);

// How many requests this process has sent (all threads), for tests and
// the status page.
int64_t HttpRequestsSent();

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_HTTP_CLIENT_H_
