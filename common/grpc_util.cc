#include "common/grpc_util.h"

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sluice {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // The numeric codes of the two are the same, by design of both.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
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
        absl::StrCat("invalid service address '", address, "': expected grpc://HOST:PORT"));
  }
  return rest;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A restarted daemon is found within a second, not after gRPC's default
  // backoff of up to two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::Status CallWithRetries(const std::function<grpc::Status(grpc::ClientContext*)>& call,
                             std::chrono::milliseconds timeout, std::chrono::milliseconds overall,
                             const std::string& what, const std::function<bool()>& cancelled) {
  const auto give_up = std::chrono::steady_clock::now() + overall;
  std::chrono::milliseconds backoff(10);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    grpc::Status status = call(&context);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return FromGrpcStatus(status);
    if (std::chrono::steady_clock::now() + backoff > give_up) {
      return absl::UnavailableError(absl::StrCat(what, ": ", status.error_message()));
    }
    std::this_thread::sleep_for(backoff);
    if (cancelled && cancelled()) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace sluice
