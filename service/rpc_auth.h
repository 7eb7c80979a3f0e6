// Token authentication of every RPC at the daemons' gRPC adapters.
//
// Two tokens: the cluster token, which workers and the dispatcher present
// to each other, and the client token, which trainers and the CLI present.
// A worker-facing RPC (a worker's heartbeat, task updates and shutdown,
// GetSplits, a worker's ProcessTask) takes only the cluster token, so a
// client cannot pose as a worker; every other RPC takes either. A token
// that is not configured is not asked for. Tokens are compared in
// constant time; a refused call is logged with its peer, at most once a
// second.
#ifndef SLUICE_SERVICE_RPC_AUTH_H_
#define SLUICE_SERVICE_RPC_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "service/server_security.h"

namespace sluice {

// Whether a presented secret (a capability: a client's, a task's read
// secret) is the expected one, in constant time in its contents. An empty
// `expected` matches nothing.
bool SameSecret(absl::string_view presented, absl::string_view expected);

// Who made a call, as its token says: a tenant (auth.clients; "" for the
// single client token), or the cluster, which sees every tenant (the
// cluster token, or any caller of a daemon without client tokens).
struct Caller {
  std::optional<std::string> tenant;
  bool SeesAll() const { return !tenant.has_value(); }
  // The tenant what the caller makes belongs to.
  std::string Owner() const { return tenant.value_or(""); }
  bool MaySee(const std::string& owner) const { return SeesAll() || *tenant == owner; }
};

enum class RpcRole {
  kClient,   // the client token or the cluster token
  kCluster,  // the cluster token only
};

class RpcAuthenticator {
 public:
  // Empty tokens: that role needs none (a cluster without tokens).
  // `tenants`' tokens act as client tokens of their tenant. The metrics
  // token is good for CheckHttp only, where it sees all.
  RpcAuthenticator(std::string cluster_token, std::string client_token, std::vector<TenantToken> tenants = {},
                   std::string metrics_token = "");

  // OK, or Unauthenticated saying which token `method` needed and what
  // the call carried. `caller`, when given, is set to who made the call.
  absl::Status Check(const grpc::ServerContextBase& context, absl::string_view method, RpcRole role,
                     Caller* caller = nullptr) const;
  // Check's decision on a call whose "authorization" metadata is
  // `authorization` (nullopt: none), for the transport's gate
  // (service/call_gate.h), which has no ServerContext: `peer` names the
  // caller in the log of a refusal.
  absl::Status CheckHeader(std::optional<absl::string_view> authorization, absl::string_view method,
                           RpcRole role, absl::FunctionRef<std::string()> peer,
                           Caller* caller = nullptr) const;

  // Who sent an HTTP request with this Authorization header ("" when it
  // had none): "Bearer TOKEN", or basic auth with the token as the
  // password (what a browser asks for). Where clients need a token (any
  // client token configured), so does the HTTP port: the cluster token
  // and the metrics token see all, a client token its tenant; no token or a wrong one is
  // Unauthenticated, saying how to send one. Without client tokens,
  // everyone is the cluster, as on the gRPC port.
  absl::StatusOr<Caller> CheckHttp(absl::string_view authorization) const;

 private:
  enum class Presented { kNone, kCluster, kClient, kTenant, kWrong };
  // `tenant`: the index of the tenant whose token was presented.
  Presented Classify(std::optional<absl::string_view> authorization, size_t* tenant) const;
  Presented ClassifyToken(absl::string_view token, size_t* tenant) const;
  bool ClientTokensConfigured() const { return !client_token_.empty() || !tenants_.empty(); }
  void LogRefusal(absl::FunctionRef<std::string()> peer, absl::string_view message) const;

  const std::string cluster_token_;
  const std::string client_token_;
  // SHA-256 of each token ("" when not configured).
  const std::string cluster_digest_;
  const std::string client_digest_;
  const std::string metrics_digest_;
  const std::vector<TenantToken> tenants_;
  std::vector<std::string> tenant_digests_;
  mutable absl::Mutex log_mu_;
  mutable std::chrono::steady_clock::time_point last_log_ ABSL_GUARDED_BY(log_mu_);
  mutable int suppressed_ ABSL_GUARDED_BY(log_mu_) = 0;
};

}  // namespace sluice

#endif  // SLUICE_SERVICE_RPC_AUTH_H_
