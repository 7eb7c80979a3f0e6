#include "service/http_request.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice {
namespace {

constexpr char kNoBody[] = "these endpoints take no request body\n";
constexpr char kPlainText[] = "text/plain; charset=utf-8";

// This Abseil's string_view is its own type, not std::string_view.
absl::string_view ToAbsl(std::string_view text) { return absl::string_view(text.data(), text.size()); }

// RFC 9110's tchar: what a method or a header name may be made of.
bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

bool IsControl(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

ParsedRequestHead Refuse(int status, std::string message) {
  ParsedRequestHead parsed;
  parsed.error_status = status;
  parsed.error_message = std::move(message);
  return parsed;
}

// The lines of a head up to its blank line, each without its "\r\n" or
// "\n"; false when a carriage return stands anywhere else, since some
// servers and proxies take a bare CR as a line break and others do not.
bool SplitLines(std::string_view head, std::vector<std::string_view>* lines) {
  while (!head.empty()) {
    const size_t newline = head.find('\n');
    std::string_view line = head.substr(0, newline);
    head = newline == std::string_view::npos ? std::string_view() : head.substr(newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos) return false;
    if (line.empty()) break;  // the blank line that ends the head
    lines->push_back(line);
  }
  return true;
}

void ParseQuery(std::string_view query, std::map<std::string, std::string>* params) {
  for (absl::string_view piece : absl::StrSplit(ToAbsl(query), '&', absl::SkipEmpty())) {
    const std::string_view pair(piece.data(), piece.size());
    const size_t equals = pair.find('=');
    std::string key = DecodeQueryComponent(pair.substr(0, equals));
    std::string value =
        equals == std::string_view::npos ? std::string() : DecodeQueryComponent(pair.substr(equals + 1));
    params->emplace(std::move(key), std::move(value));  // the first of a repeated one stays
  }
}

// What may not go into a header a handler gives: a line break would let a
// value write headers (or a body) of its own.
bool IsSafeHeaderText(const std::string& text) {
  return text.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos;
}

}  // namespace

size_t FindRequestHeadEnd(std::string_view buffer) {
  for (size_t newline = buffer.find('\n'); newline != std::string_view::npos;
       newline = buffer.find('\n', newline + 1)) {
    if (newline + 1 < buffer.size() && buffer[newline + 1] == '\n') return newline + 2;
    if (newline + 2 < buffer.size() && buffer[newline + 1] == '\r' && buffer[newline + 2] == '\n') {
      return newline + 3;
    }
  }
  return std::string::npos;
}

ParsedRequestHead ParseRequestHead(std::string_view head) {
  std::vector<std::string_view> lines;
  if (!SplitLines(head, &lines)) return Refuse(400, "stray carriage return in request head\n");
  if (lines.empty()) return Refuse(400, "malformed request line\n");

  // "GET /path?query HTTP/1.1", single spaces.
  const std::string_view line = lines[0];
  const size_t first_space = line.find(' ');
  const size_t second_space =
      first_space == std::string_view::npos ? std::string_view::npos : line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos || line.find(' ', second_space + 1) != std::string_view::npos) {
    return Refuse(400, "malformed request line\n");
  }
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  const std::string_view version = line.substr(second_space + 1);
  if (!IsToken(method) || target.empty()) return Refuse(400, "malformed request line\n");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return Refuse(400, "unsupported HTTP version: expected HTTP/1.0 or HTTP/1.1\n");
  }
  for (char c : target) {
    if (IsControl(c)) return Refuse(400, "control character in request target\n");
  }
  // Origin form only: an absolute URL ("http://host/path") or "*" would ask
  // us to act as a proxy or about the server as a whole.
  if (target.front() != '/') return Refuse(400, "request target must be a path starting with '/'\n");

  ParsedRequestHead parsed;
  parsed.method = std::string(method);
  parsed.target = std::string(target);
  parsed.version = std::string(version);
  const size_t question = target.find('?');
  parsed.request.path = std::string(target.substr(0, question));
  if (question != std::string_view::npos) ParseQuery(target.substr(question + 1), &parsed.request.params);

  bool has_body = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') {
      return Refuse(400, "obsolete line folding in headers is not supported\n");
    }
    const size_t colon = line.find(':');
    // No space before the colon: "Host : x" is refused, as RFC 9112 asks.
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Refuse(400, "malformed header line: expected 'Name: value'\n");
    }
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    for (char c : value) {
      if (IsControl(c) && c != '\t') return Refuse(400, "control character in a header value\n");
    }
    std::string name = absl::AsciiStrToLower(ToAbsl(line.substr(0, colon)));
    // Every Content-Length counts, not only the first: a later "5" behind
    // a "0" is a body all the same.
    if (name == "content-length") {
      if (value.empty()) return Refuse(400, "invalid Content-Length\n");
      for (char c : value) {
        if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
          return Refuse(400, "invalid Content-Length\n");
        }
        if (c != '0') has_body = true;
      }
    } else if (name == "transfer-encoding") {
      has_body = true;
    }
    parsed.request.headers.emplace(std::move(name), std::string(value));
  }
  if (has_body) return Refuse(413, kNoBody);
  return parsed;
}

std::string DecodeQueryComponent(std::string_view text) {
  std::string decoded;
  decoded.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      decoded.push_back(' ');
    } else if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
               HexValue(text[i + 2]) >= 0) {
      decoded.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else {
      decoded.push_back(text[i]);
    }
  }
  return decoded;
}

const char* ReasonPhrase(int status) {
  static constexpr std::pair<int, const char*> kPhrases[] = {
      {200, "OK"},
      {204, "No Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {304, "Not Modified"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {413, "Content Too Large"},
      {421, "Misdirected Request"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {503, "Service Unavailable"},
  };
  for (const auto& [known, phrase] : kPhrases) {
    if (known == status) return phrase;
  }
  if (status >= 200 && status < 300) return "Success";
  if (status >= 300 && status < 400) return "Redirection";
  if (status >= 400 && status < 500) return "Client Error";
  return "Server Error";
}

HttpResponse PlainTextResponse(int status, std::string body) {
  return HttpResponse{status, kPlainText, std::move(body), {}};
}

std::string FormatResponse(const HttpResponse& response, bool head_only) {
  const std::string& content_type =
      IsSafeHeaderText(response.content_type) ? response.content_type : std::string(kPlainText);
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ", ReasonPhrase(response.status),
                                 "\r\nContent-Type: ", content_type,
                                 "\r\nContent-Length: ", response.body.size(), "\r\nConnection: close\r\n");
  for (const auto& [name, value] : response.headers) {
    const std::string lower = absl::AsciiStrToLower(name);
    // The server frames the answer itself.
    if (lower == "content-length" || lower == "connection" || lower == "content-type" ||
        lower == "transfer-encoding" || name.empty() || name.find(':') != std::string::npos ||
        name.find(' ') != std::string::npos || !IsSafeHeaderText(name) || !IsSafeHeaderText(value)) {
      spdlog::error("http: dropped the response header '{}' given by a handler", absl::CEscape(name));
      continue;
    }
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

std::string HostOf(std::string_view host_header) {
  std::string_view host = host_header;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    host = host.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1);
  } else if (const size_t colon = host.find(':');
             colon != std::string_view::npos && host.find(':', colon + 1) == std::string_view::npos) {
    host = host.substr(0, colon);  // "name:port"; more colons make a bare IPv6 address
  }
  return absl::AsciiStrToLower(ToAbsl(host));
}

bool IsIpAddress(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace sluice
