#include "service/rpc_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sluice {
namespace {

// Tokens are compared as SHA-256 digests with CRYPTO_memcmp: constant time
// in the contents and in the length, so neither a wrong token's first
// differing byte nor the token's length shows in the answer's timing.
std::string Digest(absl::string_view token) {
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  return digest;
}

bool SameDigest(const std::string& presented, const std::string& expected) {
  return !expected.empty() && CRYPTO_memcmp(presented.data(), expected.data(), SHA256_DIGEST_LENGTH) == 0;
}

}  // namespace

bool SameSecret(absl::string_view presented, absl::string_view expected) {
  return !expected.empty() && presented.size() == expected.size() &&
         CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

RpcAuthenticator::RpcAuthenticator(std::string cluster_token, std::string client_token,
                                   std::vector<TenantToken> tenants, std::string metrics_token)
    : cluster_token_(std::move(cluster_token)),
      client_token_(std::move(client_token)),
      cluster_digest_(cluster_token_.empty() ? "" : Digest(cluster_token_)),
      client_digest_(client_token_.empty() ? "" : Digest(client_token_)),
      metrics_digest_(metrics_token.empty() ? "" : Digest(metrics_token)),
      tenants_(std::move(tenants)) {
  for (const TenantToken& tenant : tenants_) tenant_digests_.push_back(Digest(tenant.token));
}

RpcAuthenticator::Presented RpcAuthenticator::Classify(std::optional<absl::string_view> authorization,
                                                       size_t* tenant) const {
  if (!authorization.has_value()) return Presented::kNone;
  absl::string_view header = *authorization;
  if (!absl::ConsumePrefix(&header, "Bearer ")) return Presented::kWrong;
  return ClassifyToken(header, tenant);
}

RpcAuthenticator::Presented RpcAuthenticator::ClassifyToken(absl::string_view token, size_t* tenant) const {
  // All compared, so that which one matched does not show in the timing.
  const std::string presented = Digest(token);
  const bool cluster = SameDigest(presented, cluster_digest_);
  const bool client = SameDigest(presented, client_digest_);
  bool any_tenant = false;
  for (size_t i = 0; i < tenant_digests_.size(); ++i) {
    if (SameDigest(presented, tenant_digests_[i])) {
      any_tenant = true;
      *tenant = i;
    }
  }
  if (cluster) return Presented::kCluster;
  if (client) return Presented::kClient;
  if (any_tenant) return Presented::kTenant;
  return Presented::kWrong;
}

absl::Status RpcAuthenticator::Check(const grpc::ServerContextBase& context, absl::string_view method,
                                     RpcRole role, Caller* caller) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  std::optional<absl::string_view> authorization;
  if (it != metadata.end()) authorization = absl::string_view(it->second.data(), it->second.size());
  return CheckHeader(
      authorization, method, role, [&context] { return context.peer(); }, caller);
}

absl::Status RpcAuthenticator::CheckHeader(std::optional<absl::string_view> authorization,
                                           absl::string_view method, RpcRole role,
                                           absl::FunctionRef<std::string()> peer, Caller* caller) const {
  if (caller != nullptr) *caller = Caller{};
  const bool client_tokens = ClientTokensConfigured();
  if (role == RpcRole::kCluster ? cluster_token_.empty() : (!client_tokens && cluster_token_.empty())) {
    return absl::OkStatus();
  }
  size_t tenant = 0;
  const Presented presented = Classify(authorization, &tenant);
  if (presented == Presented::kCluster) return absl::OkStatus();
  if (role == RpcRole::kClient && (presented == Presented::kClient || presented == Presented::kTenant)) {
    if (caller != nullptr) {
      caller->tenant = presented == Presented::kTenant ? tenants_[tenant].name : std::string();
    }
    return absl::OkStatus();
  }
  // Without client tokens, a client needs none (nor names a tenant).
  if (role == RpcRole::kClient && !client_tokens) return absl::OkStatus();
  const char* token = role == RpcRole::kCluster ? "the cluster token" : "the client token";
  std::string message;
  switch (presented) {
    case Presented::kNone:
      message = absl::StrCat(method, " needs ", token, " and the call carried none",
                             role == RpcRole::kClient ? " (set SLUICE_TOKEN_FILE, or --token-file)" : "");
      break;
    case Presented::kClient:
    case Presented::kTenant:
      message = absl::StrCat(method,
                             " is a worker's RPC: it needs the cluster token, and the call carried the "
                             "client token");
      break;
    default:
      message = absl::StrCat(method, " needs ", token, " and the call carried a wrong one");
  }
  LogRefusal(peer, message);
  return absl::UnauthenticatedError(message);
}

absl::StatusOr<Caller> RpcAuthenticator::CheckHttp(absl::string_view authorization) const {
  if (!ClientTokensConfigured()) return Caller{};
  static constexpr char kHowTo[] =
      "send 'Authorization: Bearer TOKEN', or basic auth with the token as the password; the cluster "
      "token sees every tenant, a client token its own";
  if (authorization.empty()) {
    return absl::UnauthenticatedError(absl::StrCat("this port needs a token: ", kHowTo));
  }
  std::string token;
  absl::string_view credentials = authorization;
  if (absl::ConsumePrefix(&credentials, "Bearer ")) {
    token = std::string(credentials);
  } else if (absl::ConsumePrefix(&credentials, "Basic ")) {
    std::string decoded;
    if (!absl::Base64Unescape(credentials, &decoded)) {
      return absl::UnauthenticatedError(absl::StrCat("the basic auth credentials are not base64: ", kHowTo));
    }
    const size_t colon = decoded.find(':');
    token = colon == std::string::npos ? decoded : decoded.substr(colon + 1);
  } else {
    return absl::UnauthenticatedError(
        absl::StrCat("the Authorization header is neither Bearer nor Basic: ", kHowTo));
  }
  size_t tenant = 0;
  const Presented presented = ClassifyToken(token, &tenant);
  if (SameDigest(Digest(token), metrics_digest_)) return Caller{};
  switch (presented) {
    case Presented::kCluster:
      return Caller{};
    case Presented::kClient:
      return Caller{std::string()};
    case Presented::kTenant:
      return Caller{tenants_[tenant].name};
    default:
      return absl::UnauthenticatedError(absl::StrCat("the request carried a wrong token: ", kHowTo));
  }
}

void RpcAuthenticator::LogRefusal(absl::FunctionRef<std::string()> peer_of_call,
                                  absl::string_view message) const {
  // A client retrying without a token would otherwise fill the log.
  absl::MutexLock lock(&log_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_log_ < std::chrono::seconds(1)) {
    ++suppressed_;
    return;
  }
  const std::string peer = peer_of_call();
  if (suppressed_ > 0) {
    spdlog::warn("refused a call from {}: {} ({} more refused calls since the last message)", peer,
                 std::string(message), suppressed_);
  } else {
    spdlog::warn("refused a call from {}: {}", peer, std::string(message));
  }
  suppressed_ = 0;
  last_log_ = now;
}

}  // namespace sluice
