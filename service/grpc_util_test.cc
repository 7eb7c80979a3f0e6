#include "service/grpc_util.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

namespace sluice {
namespace {

std::string InvalidAddress(const std::string& address) {
  return "invalid service address '" + address + "': expected HOST:PORT or grpc://HOST:PORT";
}

TEST_CASE("grpc_util: ParseServiceAddress accepts grpc://HOST:PORT and HOST:PORT", "[grpc]") {
  const std::vector<std::pair<std::string, std::string>> good = {
      {"grpc://127.0.0.1:5000", "127.0.0.1:5000"},
      {"localhost:5000", "localhost:5000"},
      {"grpc://localhost:5000", "localhost:5000"},
      {"127.0.0.1:1", "127.0.0.1:1"},
      {"dispatcher.example.com:65535", "dispatcher.example.com:65535"},
      {"grpc://[::1]:5000", "[::1]:5000"},
  };
  for (const auto& [address, expected] : good) {
    INFO(address);
    absl::StatusOr<std::string> parsed = ParseServiceAddress(address);
    REQUIRE(parsed.ok());
    CHECK(*parsed == expected);
  }
}

TEST_CASE("grpc_util: ParseServiceAddress refuses other forms", "[grpc]") {
  const std::vector<std::string> bad = {
      "",           "grpc://",     "localhost",       "grpc://localhost", ":5000",         "grpc://:5000",
      "localhost:", "localhost:0", "localhost:65536", "localhost:-1",     "localhost:abc", "localhost:50x0",
  };
  for (const std::string& address : bad) {
    INFO("'" << address << "'");
    absl::StatusOr<std::string> parsed = ParseServiceAddress(address);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(parsed.status().message() == InvalidAddress(address));
  }
}

// The documented forms are "grpc://host:port" and "host:port"; another
// scheme is neither, and should be refused naming the address rather than
// passed on to gRPC as the target "http://localhost:5000".
TEST_CASE("grpc_util: ParseServiceAddress refuses another scheme", "[grpc]") {
  const std::string address = "http://localhost:5000";
  absl::StatusOr<std::string> parsed = ParseServiceAddress(address);
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(parsed.status().message() == InvalidAddress(address));
}

TEST_CASE("grpc_util: FromGrpcStatus and ToGrpcStatus keep codes and messages", "[grpc]") {
  const std::vector<std::pair<grpc::StatusCode, absl::StatusCode>> codes = {
      {grpc::StatusCode::CANCELLED, absl::StatusCode::kCancelled},
      {grpc::StatusCode::UNKNOWN, absl::StatusCode::kUnknown},
      {grpc::StatusCode::INVALID_ARGUMENT, absl::StatusCode::kInvalidArgument},
      {grpc::StatusCode::DEADLINE_EXCEEDED, absl::StatusCode::kDeadlineExceeded},
      {grpc::StatusCode::NOT_FOUND, absl::StatusCode::kNotFound},
      {grpc::StatusCode::ALREADY_EXISTS, absl::StatusCode::kAlreadyExists},
      {grpc::StatusCode::PERMISSION_DENIED, absl::StatusCode::kPermissionDenied},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, absl::StatusCode::kResourceExhausted},
      {grpc::StatusCode::FAILED_PRECONDITION, absl::StatusCode::kFailedPrecondition},
      {grpc::StatusCode::ABORTED, absl::StatusCode::kAborted},
      {grpc::StatusCode::OUT_OF_RANGE, absl::StatusCode::kOutOfRange},
      {grpc::StatusCode::UNIMPLEMENTED, absl::StatusCode::kUnimplemented},
      {grpc::StatusCode::INTERNAL, absl::StatusCode::kInternal},
      {grpc::StatusCode::UNAVAILABLE, absl::StatusCode::kUnavailable},
      {grpc::StatusCode::DATA_LOSS, absl::StatusCode::kDataLoss},
      {grpc::StatusCode::UNAUTHENTICATED, absl::StatusCode::kUnauthenticated},
  };
  for (const auto& [grpc_code, absl_code] : codes) {
    INFO(static_cast<int>(grpc_code));
    const std::string message = "message for code " + std::to_string(static_cast<int>(grpc_code));
    absl::Status from = FromGrpcStatus(grpc::Status(grpc_code, message));
    CHECK(from.code() == absl_code);
    CHECK(from.message() == message);

    grpc::Status to = ToGrpcStatus(absl::Status(absl_code, message));
    CHECK(to.error_code() == grpc_code);
    CHECK(to.error_message() == message);

    absl::Status round = FromGrpcStatus(ToGrpcStatus(absl::Status(absl_code, message)));
    CHECK(round == absl::Status(absl_code, message));
    grpc::Status back = ToGrpcStatus(FromGrpcStatus(grpc::Status(grpc_code, message)));
    CHECK(back.error_code() == grpc_code);
    CHECK(back.error_message() == message);
  }
}

TEST_CASE("grpc_util: OK converts to OK both ways", "[grpc]") {
  CHECK(FromGrpcStatus(grpc::Status::OK).ok());
  grpc::Status ok = ToGrpcStatus(absl::OkStatus());
  CHECK(ok.ok());
  CHECK(ok.error_code() == grpc::StatusCode::OK);
  CHECK(ok.error_message().empty());
  // An empty message is replaced by one that says what happened.
  absl::Status empty = FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, ""));
  CHECK(empty.code() == absl::StatusCode::kNotFound);
  CHECK(empty.message() == "the server answered NOT_FOUND with no message");
  // gRPC's answer for a method the server does not serve: the wrong kind
  // of server at that address.
  absl::Status unimplemented = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  CHECK(unimplemented.code() == absl::StatusCode::kUnimplemented);
  CHECK(
      unimplemented.message() ==
      "the server there does not serve this call: is the address that of the right kind of Sluice server (a "
      "dispatcher, not a worker, or the reverse) and of the same release?");
}

TEST_CASE("grpc_util: CheckVersion", "[grpc]") {
  CHECK(kProtocolVersion == 5);
  CHECK(std::string(kServerVersion) == "sluice 0.1.0");
  CHECK(CurrentVersion().protocol_version() == kProtocolVersion);
  CHECK(CheckVersion(CurrentVersion()).ok());

  proto::VersionInfo newer;
  newer.set_protocol_version(6);
  absl::Status status = CheckVersion(newer);
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(status.message() ==
        "protocol version mismatch: the peer speaks version 6, this server speaks 5; run the same Sluice "
        "release on both");

  absl::Status missing = CheckVersion(proto::VersionInfo());
  CHECK(missing.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(missing.message() ==
        "protocol version mismatch: the peer speaks version 0, this server speaks 5; run the same Sluice "
        "release on both");

  proto::VersionInfo negative;
  negative.set_protocol_version(-3);
  CHECK(CheckVersion(negative).message() ==
        "protocol version mismatch: the peer speaks version -3, this server speaks 5; run the same Sluice "
        "release on both");
}

TEST_CASE("grpc_util: CallWithRetries returns other errors at once", "[grpc]") {
  int calls = 0;
  absl::Status status = CallWithRetries(
      [&](grpc::ClientContext*) {
        ++calls;
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such thing");
      },
      std::chrono::milliseconds(1000), std::chrono::milliseconds(5000), "GetThing");
  CHECK(calls == 1);
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK(status.message() == "no such thing");

  calls = 0;
  CHECK(CallWithRetries(
            [&](grpc::ClientContext*) {
              ++calls;
              return grpc::Status::OK;
            },
            std::chrono::milliseconds(1000), std::chrono::milliseconds(5000), "GetThing")
            .ok());
  CHECK(calls == 1);
}

TEST_CASE("grpc_util: CallWithRetries retries UNAVAILABLE with a fresh deadline", "[grpc]") {
  int calls = 0;
  std::vector<grpc::ClientContext*> contexts;
  const auto before = std::chrono::system_clock::now();
  absl::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) {
        ++calls;
        // Each attempt gets a deadline about `timeout` away.
        CHECK(context->deadline() >= before + std::chrono::milliseconds(2000));
        CHECK(context->deadline() <= std::chrono::system_clock::now() + std::chrono::milliseconds(2000));
        return calls < 3 ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "connecting")
                         : grpc::Status(grpc::StatusCode::OK, "");
      },
      std::chrono::milliseconds(2000), std::chrono::milliseconds(10000), "GetThing");
  CHECK(status.ok());
  CHECK(calls == 3);
}

TEST_CASE("grpc_util: CallWithRetries stops retrying once cancelled", "[grpc]") {
  int calls = 0;
  const auto before = std::chrono::steady_clock::now();
  absl::Status status = CallWithRetries(
      [&](grpc::ClientContext*) {
        ++calls;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connecting");
      },
      std::chrono::milliseconds(1000), std::chrono::seconds(60), "GetSplits", [&] { return calls == 2; });
  CHECK(status == absl::CancelledError("GetSplits: cancelled"));
  CHECK(calls == 2);
  // Two backoffs (10 and 20 ms), nowhere near the 60 s it would retry for.
  CHECK(std::chrono::steady_clock::now() - before < std::chrono::seconds(5));
}

TEST_CASE("grpc_util: CallWithRetries gives up on UNAVAILABLE after the overall time", "[grpc]") {
  int calls = 0;
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = CallWithRetries(
      [&](grpc::ClientContext*) {
        ++calls;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused");
      },
      std::chrono::milliseconds(100), std::chrono::milliseconds(50), "GetThing");
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(status.code() == absl::StatusCode::kUnavailable);
  CHECK(status.message() == "GetThing: no answer within 50 ms: connection refused");
  CHECK(calls >= 1);
  CHECK(calls <= 4);
  // It never sleeps past the overall limit.
  CHECK(elapsed < std::chrono::milliseconds(1000));
}

TEST_CASE("grpc_util: CallWithRetries reports the telling reason, and says once that it is retrying",
          "[grpc][hardening]") {
  int calls = 0;
  std::vector<std::string> told;
  absl::Status status = CallWithRetries(
      [&](grpc::ClientContext*) {
        // The last attempt is cut short by its deadline, as a connect in
        // progress is; the earlier ones said why.
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            ++calls < 4 ? "Connection refused" : "tcp handshaker shutdown");
      },
      std::chrono::milliseconds(100), std::chrono::milliseconds(1300), "GetThing", nullptr,
      [&](const std::string& reason) { told.push_back(reason); });
  CHECK(status.code() == absl::StatusCode::kUnavailable);
  CHECK(status.message() == "GetThing: no answer within 1300 ms: Connection refused");
  CHECK(calls >= 5);
  CHECK(told == std::vector<std::string>{"Connection refused"});
}

}  // namespace
}  // namespace sluice
