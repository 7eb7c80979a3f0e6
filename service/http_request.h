// HttpServer's HTTP/1.1 on the wire, as pure functions: finding the end of a
// request head in the bytes read so far, parsing it, the Host header checks,
// and the bytes of an answer. Nothing here touches a socket, so every
// malformed input can be tested directly.
//
//   const size_t end = FindRequestHeadEnd(buffer);
//   if (end == std::string::npos) return;  // read more (up to a limit)
//   ParsedRequestHead parsed = ParseRequestHead(std::string_view(buffer).substr(0, end));
//   if (parsed.error_status != 0) Answer(parsed.error_status, parsed.error_message);
//
// The parser is strict on purpose: the server answers a few GET endpoints,
// so anything beyond GET-shaped requests (bodies, absolute-form targets,
// obsolete line folding, other HTTP versions) is refused rather than
// interpreted.
#ifndef SLUICE_SERVICE_HTTP_REQUEST_H_
#define SLUICE_SERVICE_HTTP_REQUEST_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice {

// What a handler sees of a request.
struct HttpRequest {
  // The target's path, raw (not percent-decoded): routes match it exactly.
  std::string path;
  // Query parameters, percent-decoded ('+' is a space); the first value of
  // a repeated one.
  std::map<std::string, std::string> params;
  // By lower-case name; the first value of a repeated header, without the
  // surrounding spaces.
  std::map<std::string, std::string> headers;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Extra headers, such as {"WWW-Authenticate", "Basic realm=\"sluice\""}.
  // FormatResponse sets Content-Type, Content-Length and Connection itself,
  // and drops a header with a line break in it.
  std::vector<std::pair<std::string, std::string>> headers;
};

// A request head parsed, or why it cannot be answered.
struct ParsedRequestHead {
  // 0 when the head is well formed; otherwise the status to answer (400, or
  // 413 for a request with a body) and the body to answer it with.
  int error_status = 0;
  std::string error_message;

  std::string method;   // "GET"; any token is accepted here
  std::string target;   // "/status.json?x=1", as sent
  std::string version;  // "HTTP/1.0" or "HTTP/1.1"
  HttpRequest request;
};

// The length of the request head at the start of `buffer`, through the
// blank line that ends it ("\r\n\r\n", or bare "\n\n" from hand-typed
// requests), or std::string::npos when that line has not arrived yet.
size_t FindRequestHeadEnd(std::string_view buffer);

// Parses a request head: the request line and header lines, with or without
// the blank line that ends it. Never throws; every problem is an
// error_status with a message naming it.
ParsedRequestHead ParseRequestHead(std::string_view head);

// Percent-decodes a query component: "%41" is 'A' and '+' a space; a '%'
// not followed by two hex digits is kept as it is.
std::string DecodeQueryComponent(std::string_view text);

// A text/plain answer, as the server gives for its own errors.
HttpResponse PlainTextResponse(int status, std::string body);

// The bytes of an answer, which closes the connection ("Connection: close").
// For HEAD (head_only), GET's status and headers without the body.
std::string FormatResponse(const HttpResponse& response, bool head_only);

// "Not Found" for 404; a phrase for the class of a status without its own.
const char* ReasonPhrase(int status);

// The host of a Host header ("name:port", "[v6]:port", "v6"), lower case.
std::string HostOf(std::string_view host_header);

// Whether `host` is an IPv4 or IPv6 address (not a name).
bool IsIpAddress(const std::string& host);

}  // namespace sluice

#endif  // SLUICE_SERVICE_HTTP_REQUEST_H_
