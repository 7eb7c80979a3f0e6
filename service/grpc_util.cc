#include "service/grpc_util.h"

#include <grpc/grpc.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/channel_security.h"

namespace sluice {
namespace {

// Whether gRPC was running at the last fork, and whether this process is a
// child (or grandchild) of a fork made while it was. Set by fork handlers:
// atomics only, no locks.
std::atomic<bool> grpc_live_at_fork{false};
std::atomic<bool> forked_while_grpc_live{false};

// Whether gRPC is still running, given up to 1 s to finish shutting down:
// the last channel of a call that just returned may be released on one of
// gRPC's own threads, which shuts gRPC down asynchronously, so a fork right
// after a finished call could otherwise see it live (once in CI, 3 of 4
// children forked right after `element_spec` were refused).
bool GrpcLiveAfterShutdownGrace() {
  for (int waited_ms = 0; grpc_is_initialized() != 0; waited_ms += 5) {
    if (waited_ms >= 1000) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Registered when the library loads, before any fork that matters.
const bool fork_handlers_registered = [] {
  pthread_atfork([] { grpc_live_at_fork.store(GrpcLiveAfterShutdownGrace()); }, nullptr,
                 [] {
                   if (grpc_live_at_fork.load()) forked_while_grpc_live.store(true);
                 });
  return true;
}();

}  // namespace

absl::Status CheckGrpcUsableAfterFork() {
  (void)fork_handlers_registered;
  if (!forked_while_grpc_live.load()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "this process was forked while its parent had a Sluice read or service call in progress, whose gRPC "
      "state a child cannot use: let the parent's iterators end (or del them) before the DataLoader starts "
      "its workers (persistent_workers=True keeps them), or use multiprocessing_context='spawn'");
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // The numeric codes of the two are the same, by design of both.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (!status.error_message().empty()) return absl::Status(code, status.error_message());
  // gRPC says nothing when the peer serves no such method: most often the
  // address is another kind of server (a worker's port given as the
  // dispatcher's, or the reverse).
  if (code == absl::StatusCode::kUnimplemented) {
    return absl::UnimplementedError(
        "the server there does not serve this call: is the address that of the right kind of Sluice "
        "server (a dispatcher, not a worker, or the reverse) and of the same release?");
  }
  return absl::Status(
      code, absl::StrCat("the server answered ", absl::StatusCodeToString(code), " with no message"));
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

proto::VersionInfo CurrentVersion() {
  proto::VersionInfo version;
  version.set_protocol_version(kProtocolVersion);
  return version;
}

absl::Status CheckVersion(const proto::VersionInfo& version) {
  if (version.protocol_version() == kProtocolVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("protocol version mismatch: the peer speaks version ", version.protocol_version(),
                   ", this server speaks ", kProtocolVersion, "; run the same Sluice release on both"));
}

absl::StatusOr<std::string> ParseServiceAddress(const std::string& address) {
  std::string rest = address;
  if (absl::StartsWith(rest, "grpc://")) rest = rest.substr(7);
  const size_t colon = rest.rfind(':');
  int port = 0;
  const std::string host = colon == std::string::npos ? "" : rest.substr(0, colon);
  // A colon in the host only in a bracketed IPv6 address: "[::1]:5000".
  const bool host_ok = !host.empty() && rest.find("://") == std::string::npos &&
                       (host.find(':') == std::string::npos || (host.front() == '[' && host.back() == ']'));
  if (!host_ok || !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid service address '", address, "': expected HOST:PORT or grpc://HOST:PORT"));
  }
  return rest;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const ChannelOptions& options) {
  const absl::StatusOr<ChannelSecurity> security = DefaultChannelSecurity();
  // An unreadable SLUICE_TOKEN_FILE is reported by DispatcherClient's
  // first call; until then the channel goes without.
  return MakeSecureChannel(address, security.ok() ? *security : ChannelSecurity{}, options.own_connection,
                           options.idle_timeout_ms);
}

absl::Status CallWithRetries(const std::function<grpc::Status(grpc::ClientContext*)>& call,
                             std::chrono::milliseconds timeout, std::chrono::milliseconds overall,
                             const std::string& what, const std::function<bool()>& cancelled,
                             const std::function<void(const std::string& reason)>& still_retrying) {
  const auto start = std::chrono::steady_clock::now();
  const auto give_up = start + overall;
  std::chrono::milliseconds backoff(10);
  // The most telling reason the peer did not answer: a call cut short by
  // its deadline says only "tcp handshaker shutdown", while an earlier one
  // may have said "Connection refused".
  std::string reason;
  bool told = false;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::min(timeout, overall));
    grpc::Status status = call(&context);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return FromGrpcStatus(status);
    if (reason.empty() || !absl::StrContains(status.error_message(), "handshaker shutdown")) {
      reason = status.error_message();
    }
    const auto now = std::chrono::steady_clock::now();
    if (still_retrying && !told && now + backoff - start >= std::chrono::seconds(1)) {
      told = true;
      still_retrying(reason);
    }
    if (now + backoff > give_up) {
      return absl::UnavailableError(absl::StrCat(what, ": no answer within ", overall.count(),
                                                 " ms: ", reason.empty() ? "no reason given" : reason));
    }
    std::this_thread::sleep_for(backoff);
    if (cancelled && cancelled()) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace sluice
