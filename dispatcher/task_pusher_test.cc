// GrpcTaskPusher against workers that never take a push: its channels go
// idle after kPushIdleTimeoutMs and stop redialling (at 2,000 unreachable
// workers the redials cost the dispatcher 0.43 of a core, bench/README.md).
#include "dispatcher/task_pusher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "service/worker_client.h"

namespace sluice::dispatcher {
namespace {

// A TCP listener on 127.0.0.1 that accepts every connection and closes it
// at once, counting them: a worker's address where every dial fails.
class ClosingListener {
 public:
  ClosingListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(::listen(fd_, 64) == 0);
    socklen_t length = sizeof(address);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd ready{fd_, POLLIN, 0};
        if (::poll(&ready, 1, 50) <= 0) continue;
        const int connection = ::accept(fd_, nullptr, nullptr);
        if (connection < 0) continue;
        ::close(connection);
        ++accepted_;
      }
    });
  }
  ~ClosingListener() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

TEST_CASE("task_pusher: a channel to a worker that never takes a push stops redialling once idle",
          "[dispatcher][task_pusher]") {
  ClosingListener unreachable;
  ClosingListener control;
  proto::TaskDef task;
  task.set_task_id(1);
  GrpcTaskPusher pusher;
  pusher.Push(unreachable.address(), task);
  // The control: a channel without an idle timeout, as the pusher's were,
  // redials about once a second (the reconnect backoff's cap) for as long
  // as it lives.
  WorkerClient always(control.address());
  absl::Notification control_done;
  always.ProcessTask(task, [&](absl::Status) { control_done.Notify(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(kPushIdleTimeoutMs) + std::chrono::seconds(4));
  REQUIRE(control_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  const int dialled = unreachable.accepted();
  const int control_dialled = control.accepted();
  CHECK(dialled >= 1);  // the push itself, and redials until idle
  std::this_thread::sleep_for(std::chrono::seconds(3));
  CHECK(unreachable.accepted() == dialled);
  CHECK(control.accepted() - control_dialled >= 2);
}

}  // namespace
}  // namespace sluice::dispatcher
