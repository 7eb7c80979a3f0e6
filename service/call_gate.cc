#include "service/call_gate.h"

#include <grpc/grpc_security.h>

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/grpc_util.h"
#include "service/rpc_metrics.h"

namespace sluice {
namespace {

constexpr char kUnknownPeer[] = "a peer gRPC does not name at the transport";

// Open without a token: probes (Kubernetes' gRPC probes,
// grpc_health_probe) and grpcurl-style tools.
bool IsOpenService(absl::string_view path) {
  return absl::StartsWith(path, "/grpc.health.v1.Health/") ||
         absl::StartsWith(path, "/grpc.reflection.v1alpha.ServerReflection/") ||
         absl::StartsWith(path, "/grpc.reflection.v1.ServerReflection/");
}

// Credentials without TLS that take an auth metadata processor. gRPC 1.51's
// InsecureServerCredentials() cannot (it asserts), though the core's
// insecure credentials run one; the processor is called through the C
// API, synchronously, as CallGate never blocks.
class InsecureGatedCredentials final : public grpc::ServerCredentials {
 public:
  explicit InsecureGatedCredentials(std::shared_ptr<CallGate> gate)
      : credentials_(grpc_insecure_server_credentials_create()) {
    // The core's credentials outlive these (the server's channels hold
    // them), so they own the gate: `destroy` lets it go with them.
    grpc_server_credentials_set_auth_metadata_processor(
        credentials_, {&Process, &Destroy, new std::shared_ptr<CallGate>(std::move(gate))});
  }
  ~InsecureGatedCredentials() override { grpc_server_credentials_release(credentials_); }
  InsecureGatedCredentials(const InsecureGatedCredentials&) = delete;
  InsecureGatedCredentials& operator=(const InsecureGatedCredentials&) = delete;

  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {
    // Never called: the gate is set at construction.
  }

 private:
  int AddPortToServer(const std::string& address, grpc_server* server) override {
    return grpc_server_add_http2_port(server, address.c_str(), credentials_);
  }

  static void Process(void* state, grpc_auth_context*, const grpc_metadata* metadata, size_t count,
                      grpc_process_auth_metadata_done_cb done, void* user_data) {
    absl::string_view path;
    std::optional<absl::string_view> authorization;
    for (size_t i = 0; i < count; ++i) {
      const absl::string_view key(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(metadata[i].key)),
                                  GRPC_SLICE_LENGTH(metadata[i].key));
      const absl::string_view value(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(metadata[i].value)),
                                    GRPC_SLICE_LENGTH(metadata[i].value));
      if (key == ":path") path = value;
      if (key == "authorization" && !authorization.has_value()) authorization = value;
    }
    const absl::Status status =
        (*static_cast<std::shared_ptr<CallGate>*>(state))->Decide(path, authorization);
    const std::string message(status.message());
    done(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(status.code()),
         status.ok() ? nullptr : message.c_str());
  }

  static void Destroy(void* state) { delete static_cast<std::shared_ptr<CallGate>*>(state); }

  grpc_server_credentials* const credentials_;
};

}  // namespace

CallGate::CallGate(std::shared_ptr<const RpcAuthenticator> auth, std::string service, RpcRoleOf role_of)
    : auth_(std::move(auth)), method_prefix_(absl::StrCat("/", service, "/")), role_of_(std::move(role_of)) {}

absl::Status CallGate::Decide(absl::string_view path, std::optional<absl::string_view> authorization) const {
  if (IsOpenService(path)) return absl::OkStatus();
  absl::string_view method = path;
  std::optional<RpcRole> role;
  if (absl::ConsumePrefix(&method, method_prefix_)) role = role_of_(method);
  const auto start = std::chrono::steady_clock::now();
  absl::Status status =
      auth_->CheckHeader(authorization, role.has_value() ? method : "a method this daemon does not serve",
                         role.value_or(RpcRole::kClient), [] { return std::string(kUnknownPeer); });
  // Counted as the handler would have counted it.
  if (!status.ok() && role.has_value()) RecordRpc(method, status, start);
  return status;
}

grpc::Status CallGate::Process(const InputMetadata& metadata, grpc::AuthContext*, OutputMetadata*,
                               OutputMetadata*) {
  absl::string_view path;
  std::optional<absl::string_view> authorization;
  for (const auto& [key, value] : metadata) {
    if (key == ":path") path = absl::string_view(value.data(), value.size());
    if (key == "authorization" && !authorization.has_value()) {
      authorization = absl::string_view(value.data(), value.size());
    }
  }
  return ToGrpcStatus(Decide(path, authorization));
}

std::shared_ptr<grpc::ServerCredentials> GatedServerCredentials(const ServerSecurity& security,
                                                                std::shared_ptr<CallGate> gate) {
  if (!security.tls) return std::make_shared<InsecureGatedCredentials>(std::move(gate));
  std::shared_ptr<grpc::ServerCredentials> credentials = MakeServerCredentials(security);
  credentials->SetAuthMetadataProcessor(std::move(gate));
  return credentials;
}

}  // namespace sluice
