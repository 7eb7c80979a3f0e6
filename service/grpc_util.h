// The boundary between gRPC and the rest of Sluice: status conversion (the
// only place it happens), protocol-version checks, channels, deadlines and
// retries of UNAVAILABLE with backoff.
#ifndef SLUICE_SERVICE_GRPC_UTIL_H_
#define SLUICE_SERVICE_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/proto/service.pb.h"

namespace sluice {

// Bumped on any incompatible protocol change.
// 2: GetSplits answers runs of splits (SplitProto.count), which a version 1
// worker would read as single splits.
// 3: capabilities: ClientHeartbeat needs the client's secret and
// GetElements the task's read secret (issue 32).
// 4: parallel_epochs readers read a task its dispatcher unlisted until its
// worker answers task_not_here, which a version 3 worker never says (it
// answers empty), and workers given up keep such tasks (issue 50).
// 5: a shared exactly_once read's lost splits are held until each client
// answers report_hold, and rerun with skip_positions, which a version 4
// client never answers and a version 4 worker would serve again (issue 50).
inline constexpr int kProtocolVersion = 5;
inline constexpr char kServerVersion[] = "sluice 0.1.0";

absl::Status FromGrpcStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);

proto::VersionInfo CurrentVersion();
// FailedPrecondition naming both versions when they differ.
absl::Status CheckVersion(const proto::VersionInfo& version);

// "grpc://host:port" or "host:port" to "host:port"; InvalidArgument
// naming the address when it is not of that form.
absl::StatusOr<std::string> ParseServiceAddress(const std::string& address);

// How a channel connects, beside its security.
struct ChannelOptions {
  // A TCP connection of the channel's own, never shared with another
  // channel to the same address (gRPC shares them by default).
  bool own_connection = false;
  // Without calls for this long, the channel lets its connection go (and
  // stops reconnecting to a peer that is gone); 0: gRPC's default (30 min).
  int idle_timeout_ms = 0;
};

// OK, unless this process was forked while gRPC was running in its parent
// (a read or call in progress there): then FailedPrecondition saying so.
// gRPC 1.51's poller, locks and threads in such a child are the parent's,
// and a call hangs or crashes; a child forked while gRPC was shut down
// (between reads, which hold no channel) starts it afresh and reads.
absl::Status CheckGrpcUsableAfterFork();

// A channel with DefaultChannelSecurity() (service/channel_security.h): the
// process's token and TLS settings.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const ChannelOptions& options = {});
inline constexpr int kMaxMessageBytes = 256 * 1024 * 1024;
// The memory a daemon's gRPC server may hold for all its connections'
// incoming bytes together (its ResourceQuota): room for one message of the
// largest size and as much again. gRPC reads a request's whole body before
// its handler runs: a caller without a good token is refused on its
// headers (call_gate.h), so this bounds what token holders send, which
// before the gate let thirty strangers sending 200 MiB each grow a worker
// to 3 GB.
inline constexpr size_t kServerTransportMemoryBytes = size_t{2} * kMaxMessageBytes;

// Calls `call` with a fresh context whose deadline is `timeout` away, and
// retries UNAVAILABLE with exponential backoff (10 ms doubling to 1 s) until
// `overall` has passed; the error then names how long it waited and the
// most telling reason seen ("Connection refused"). Other errors return at
// once. When `cancelled` is given and returns true between attempts, the
// call gives up: Cancelled. `still_retrying`, when given, hears the reason
// once the peer has not answered for a second, so that a caller can say
// that it is waiting.
absl::Status CallWithRetries(const std::function<grpc::Status(grpc::ClientContext*)>& call,
                             std::chrono::milliseconds timeout, std::chrono::milliseconds overall,
                             const std::string& what, const std::function<bool()>& cancelled = nullptr,
                             const std::function<void(const std::string& reason)>& still_retrying = nullptr);

}  // namespace sluice

#endif  // SLUICE_SERVICE_GRPC_UTIL_H_
