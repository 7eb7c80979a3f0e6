// DispatcherClient: every call to the dispatcher goes through here, from
// the SDK, the worker, the CLI, the tests and the benchmarks. It sets the
// protocol version, gives each attempt a deadline, and retries UNAVAILABLE
// with backoff for as long as the caller allows (CallWithRetries), so that
// no caller writes these out again.
//
//   DispatcherClient dispatcher("127.0.0.1:5000");
//   proto::GetWorkersResponse workers;
//   absl::Status status = dispatcher.GetWorkers({}, &workers, {.retry_for = std::chrono::seconds(5)});
#ifndef SLUICE_SERVICE_DISPATCHER_CLIENT_H_
#define SLUICE_SERVICE_DISPATCHER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "service/dispatcher_rpcs.h"
#include "sluice/proto/service.grpc.pb.h"

namespace sluice {

// Each attempt's deadline, unless a call says otherwise.
inline constexpr std::chrono::milliseconds kDispatcherRpcTimeout = std::chrono::seconds(10);

// How one call is made.
struct DispatcherCall {
  // The deadline of each attempt.
  std::chrono::milliseconds attempt_timeout = kDispatcherRpcTimeout;
  // UNAVAILABLE is retried with backoff until this much time has passed,
  // and no attempt runs past it; zero makes one attempt.
  std::chrono::milliseconds retry_for{0};
  // Names the call in the error after retrying; "METHOD at ADDRESS" when
  // empty.
  std::string what;
  // Checked between attempts; true gives up with Cancelled.
  std::function<bool()> cancelled;
  // Hears the reason once the dispatcher has not answered for a second.
  std::function<void(const std::string& reason)> still_retrying;
};

class DispatcherClient {
 public:
  // `address` is HOST:PORT.
  explicit DispatcherClient(std::string address);
  const std::string& address() const { return address_; }

  // One method per RPC; each sets the request's version.
#define SLUICE_DECLARE_DISPATCHER_CALL(Method, Request, Response) \
  absl::Status Method(proto::Request request, proto::Response* response, const DispatcherCall& call = {});
  SLUICE_DISPATCHER_RPCS(SLUICE_DECLARE_DISPATCHER_CALL)
#undef SLUICE_DECLARE_DISPATCHER_CALL

 private:
  absl::Status Call(const char* method, const DispatcherCall& call,
                    const std::function<grpc::Status(grpc::ClientContext*)>& attempt);

  const std::string address_;
  std::unique_ptr<proto::DispatcherService::Stub> stub_;
};

}  // namespace sluice

#endif  // SLUICE_SERVICE_DISPATCHER_CLIENT_H_
