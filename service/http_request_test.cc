#include "service/http_request.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace sluice {
namespace {

using Headers = std::map<std::string, std::string>;
using namespace std::string_literals;

TEST_CASE("http request: the end of a head, with CRLF or bare LF", "[http]") {
  CHECK(FindRequestHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == 27);
  CHECK(FindRequestHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody") == 27);
  CHECK(FindRequestHeadEnd("GET / HTTP/1.1\nHost: a\n\n") == 24);
  CHECK(FindRequestHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n") == std::string::npos);
  CHECK(FindRequestHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r") == std::string::npos);
  CHECK(FindRequestHeadEnd("") == std::string::npos);
}

TEST_CASE("http request: a GET with a query and headers", "[http]") {
  const ParsedRequestHead parsed = ParseRequestHead(
      "GET /status.json?name=%41b+c&name=second&flag&empty=&%6Bey=v%2Bw&bad=%zz%4 HTTP/1.1\r\n"
      "Host: Example.COM:8080\r\n"
      "X-Custom:  spaced value \t\r\n"
      "x-custom: second\r\n"
      "ACCEPT:text/plain\r\n"
      "\r\n");
  INFO(parsed.error_message);
  REQUIRE(parsed.error_status == 0);
  CHECK(parsed.method == "GET");
  CHECK(parsed.target == "/status.json?name=%41b+c&name=second&flag&empty=&%6Bey=v%2Bw&bad=%zz%4");
  CHECK(parsed.version == "HTTP/1.1");
  CHECK(parsed.request.path == "/status.json");
  CHECK(parsed.request.params ==
        Headers{{"name", "Ab c"}, {"flag", ""}, {"empty", ""}, {"key", "v+w"}, {"bad", "%zz%4"}});
  CHECK(parsed.request.headers ==
        Headers{{"host", "Example.COM:8080"}, {"x-custom", "spaced value"}, {"accept", "text/plain"}});
}

TEST_CASE("http request: paths are kept raw, HTTP/1.0 and bare LF are accepted", "[http]") {
  ParsedRequestHead parsed = ParseRequestHead("HEAD /a%20b HTTP/1.0\n\n");
  REQUIRE(parsed.error_status == 0);
  CHECK(parsed.method == "HEAD");
  CHECK(parsed.version == "HTTP/1.0");
  CHECK(parsed.request.path == "/a%20b");
  CHECK(parsed.request.params.empty());
  CHECK(parsed.request.headers.empty());

  parsed = ParseRequestHead("POST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n");  // no body: fine here
  REQUIRE(parsed.error_status == 0);
  CHECK(parsed.method == "POST");
  CHECK(parsed.request.headers == Headers{{"content-length", "0"}});
}

TEST_CASE("http request: malformed heads are 400, naming the problem", "[http]") {
  const auto refusal = [](const std::string& head) {
    const ParsedRequestHead parsed = ParseRequestHead(head);
    return std::make_pair(parsed.error_status, parsed.error_message);
  };
  using Refusal = std::pair<int, std::string>;
  const Refusal bad_line{400, "malformed request line\n"};
  CHECK(refusal("") == bad_line);
  CHECK(refusal("\r\n\r\n") == bad_line);
  CHECK(refusal("GET /\r\n\r\n") == bad_line);
  CHECK(refusal("GET  / HTTP/1.1\r\n\r\n") == bad_line);
  CHECK(refusal("GET / HTTP/1.1 extra\r\n\r\n") == bad_line);
  CHECK(refusal("G(T / HTTP/1.1\r\n\r\n") == bad_line);
  CHECK(refusal("GET /a b HTTP/1.1\r\n\r\n") == bad_line);

  const Refusal bad_version{400, "unsupported HTTP version: expected HTTP/1.0 or HTTP/1.1\n"};
  CHECK(refusal("GET / HTTP/2.0\r\n\r\n") == bad_version);
  CHECK(refusal("GET / http/1.1\r\n\r\n") == bad_version);
  CHECK(refusal("GET / HTTP/1.1 \r\n\r\n") == bad_line);

  const Refusal not_a_path{400, "request target must be a path starting with '/'\n"};
  CHECK(refusal("GET http://example.com/ HTTP/1.1\r\n\r\n") == not_a_path);
  CHECK(refusal("OPTIONS * HTTP/1.1\r\n\r\n") == not_a_path);
  CHECK(refusal("GET status HTTP/1.1\r\n\r\n") == not_a_path);
  CHECK(refusal("GET /a\0b HTTP/1.1\r\n\r\n"s) == Refusal{400, "control character in request target\n"});
  CHECK(refusal("GET /a\x7f HTTP/1.1\r\n\r\n") == Refusal{400, "control character in request target\n"});

  const Refusal bad_header{400, "malformed header line: expected 'Name: value'\n"};
  CHECK(refusal("GET / HTTP/1.1\r\nNo colon here\r\n\r\n") == bad_header);
  CHECK(refusal("GET / HTTP/1.1\r\n: empty name\r\n\r\n") == bad_header);
  CHECK(refusal("GET / HTTP/1.1\r\nHost : a\r\n\r\n") == bad_header);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n") ==
        Refusal{400, "obsolete line folding in headers is not supported\n"});
  CHECK(refusal("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n"s) ==
        Refusal{400, "control character in a header value\n"});
  CHECK(refusal("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n") ==
        Refusal{400, "stray carriage return in request head\n"});
  CHECK(refusal("GET / HTTP/1.1\r\nContent-Length: five\r\n\r\n") ==
        Refusal{400, "invalid Content-Length\n"});
  CHECK(refusal("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n") == Refusal{400, "invalid Content-Length\n"});
}

TEST_CASE("http request: a body is 413", "[http]") {
  for (const std::string& head :
       {std::string("GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"),
        std::string("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\ncontent-length: 0\r\nContent-Length: 7\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n")}) {
    INFO(head);
    const ParsedRequestHead parsed = ParseRequestHead(head);
    CHECK(parsed.error_status == 413);
    CHECK(parsed.error_message == "these endpoints take no request body\n");
  }
}

TEST_CASE("http request: the host of a Host header", "[http]") {
  CHECK(HostOf("Example.COM:8080") == "example.com");
  CHECK(HostOf("localhost") == "localhost");
  CHECK(HostOf("127.0.0.1:9090") == "127.0.0.1");
  CHECK(HostOf("[::1]:9090") == "::1");
  CHECK(HostOf("[FE80::1]") == "fe80::1");
  CHECK(HostOf("::1") == "::1");  // a bare IPv6 address keeps its colons
  CHECK(HostOf("") == "");
  CHECK(IsIpAddress("127.0.0.1"));
  CHECK(IsIpAddress("::1"));
  CHECK(IsIpAddress("fe80::1"));
  CHECK_FALSE(IsIpAddress("localhost"));
  CHECK_FALSE(IsIpAddress("1.2.3"));
  CHECK_FALSE(IsIpAddress(""));
}

TEST_CASE("http request: query components are percent-decoded", "[http]") {
  CHECK(DecodeQueryComponent("%41%62c") == "Abc");
  CHECK(DecodeQueryComponent("a+b%20c") == "a b c");
  CHECK(DecodeQueryComponent("%2B") == "+");
  CHECK(DecodeQueryComponent("100%") == "100%");
  CHECK(DecodeQueryComponent("%4") == "%4");
  CHECK(DecodeQueryComponent("%g1") == "%g1");
  CHECK(DecodeQueryComponent("%00") == std::string(1, '\0'));
}

TEST_CASE("http request: the bytes of an answer", "[http]") {
  HttpResponse response{
      404, "text/html", "<p>gone</p>", {{"Cache-Control", "no-store"}, {"X-Split", "a\nb"}}};
  CHECK(FormatResponse(response, false) ==
        "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 11\r\nConnection: close\r\n"
        "Cache-Control: no-store\r\n\r\n<p>gone</p>");
  // HEAD: GET's headers, Content-Length included, and no body.
  CHECK(FormatResponse(response, true) ==
        "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 11\r\nConnection: close\r\n"
        "Cache-Control: no-store\r\n\r\n");
  // A content type that would split the answer falls back to plain text.
  CHECK(FormatResponse(HttpResponse{200, "text/plain\r\nX: y", "", {}}, false) ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 0\r\nConnection: "
        "close\r\n\r\n");
  CHECK(
      FormatResponse(PlainTextResponse(503, "busy, try again\n"), false) ==
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 16\r\n"
      "Connection: close\r\n\r\nbusy, try again\n");
  CHECK(std::string(ReasonPhrase(431)) == "Request Header Fields Too Large");
  CHECK(std::string(ReasonPhrase(299)) == "Success");
  CHECK(std::string(ReasonPhrase(399)) == "Redirection");
  CHECK(std::string(ReasonPhrase(418)) == "Client Error");
  CHECK(std::string(ReasonPhrase(599)) == "Server Error");
}

}  // namespace
}  // namespace sluice
