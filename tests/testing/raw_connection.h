// RawConnection: a TCP client socket on 127.0.0.1 for tests of the HTTP
// port, for what an honest client would not send (a request a byte at a
// time, or nothing at all), and Exchange, one request on a connection of
// its own. Used by service/http_server_test.cc against an in-process
// server and by the integration tests against real daemons.
//
//   RawConnection slow(port);
//   slow.Send("G");                                     // and no more for now
//   CHECK(Exchange(port, "GET /healthz HTTP/1.1\r\n\r\n") == answer);
//   CHECK(slow.ReadToEnd(1000ms).closed);               // the server gave up on it
#ifndef SLUICE_TESTS_TESTING_RAW_CONNECTION_H_
#define SLUICE_TESTS_TESTING_RAW_CONNECTION_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::testing {

class RawConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects at once (blocking). receive_buffer_bytes > 0 makes the client
  // a slow reader's size.
  explicit RawConnection(int port, int receive_buffer_bytes = 0)
      : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (receive_buffer_bytes > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof(receive_buffer_bytes));
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }

  // False once the server has closed the connection.
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t sent = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

  struct Received {
    std::string bytes;
    bool closed = false;  // an end of stream or a reset
  };
  // Reads until the server closes the connection or `timeout` passes.
  Received ReadToEnd(std::chrono::milliseconds timeout) {
    Received received;
    const Clock::time_point deadline = Clock::now() + timeout;
    char buffer[65536];
    while (Clock::now() < deadline) {
      pollfd readable{fd_, POLLIN, 0};
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (poll(&readable, 1, static_cast<int>(std::max<int64_t>(left, 0))) <= 0) continue;
      const ssize_t got = recv(fd_, buffer, sizeof(buffer), 0);
      if (got > 0) {
        received.bytes.append(buffer, static_cast<size_t>(got));
      } else {
        received.closed = got == 0 || errno == ECONNRESET;
        if (received.closed) break;
      }
    }
    return received;
  }

  // Waits up to `timeout` for the server to close the connection (or
  // reset it) without reading what it sent; true if it did.
  bool WaitForClose(std::chrono::milliseconds timeout) {
    pollfd closed{fd_, POLLRDHUP, 0};
    return poll(&closed, 1, static_cast<int>(std::max<int64_t>(timeout.count(), 0))) == 1;
  }

 private:
  const int fd_;
  bool connected_ = false;
};

// Sends `request` on a new connection and reads until the server closes it:
// what came, with "(not closed)" appended when `timeout` passed first.
inline std::string Exchange(int port, std::string_view request,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  RawConnection connection(port);
  if (!connection.connected() || !connection.Send(request)) return "(cannot send)";
  RawConnection::Received received = connection.ReadToEnd(timeout);
  return received.closed ? received.bytes : received.bytes + "(not closed)";
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_RAW_CONNECTION_H_
