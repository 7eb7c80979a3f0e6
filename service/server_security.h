// A daemon's security settings (auth.*, tls.*, insecure) as both daemons
// read them, what they load into, and the safe-by-default check on the
// bind address.
#ifndef SLUICE_SERVICE_SERVER_SECURITY_H_
#define SLUICE_SERVICE_SERVER_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config_schema.h"
#include "service/channel_security.h"

namespace sluice {

struct SecuritySettings {
  std::string cluster_token_file;
  std::string client_token_file;
  // A token for the HTTP port only: /metrics and the status page of the
  // whole cluster, and no RPC (what Prometheus holds).
  std::string metrics_token_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  bool tls_require_client_cert = false;
  // The name in the daemons' certificates, checked instead of the host
  // when this daemon calls another (workers at pod IPs).
  std::string tls_server_name;
  // Allows listening beyond loopback with neither auth nor TLS.
  bool insecure = false;
  // auth.clients: tenants, each {name, token_file}, besides the single
  // client token (docs/operations.md, "Tenants").
  std::vector<ConfigSchema::Record> clients;
};
// Registers auth.cluster_token_file, auth.client_token_file,
// auth.metrics_token_file, auth.clients, tls.cert_file,
// tls.key_file, tls.ca_file, tls.require_client_cert and insecure.
void DescribeSecuritySettings(SecuritySettings* settings, ConfigSchema* schema);

// A tenant: the name its datasets, jobs and iterations belong to, and the
// token its clients present.
struct TenantToken {
  std::string name;
  std::string token;
  // Where this tenant's pipelines may read besides the daemon's data_roots
  // (the shared ones), and where they write file caches (default: a
  // directory of its own under the daemon's cache_dir).
  std::vector<std::string> data_roots;
  std::string cache_dir;
};

struct ServerSecurity {
  std::string cluster_token;
  std::string client_token;
  std::string metrics_token;
  std::vector<TenantToken> tenants;
  bool tls = false;
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  bool require_client_cert = false;
  std::string server_name;
  bool insecure = false;

  // Who may act as a client: the single client token is one tenant, each
  // of auth.clients another; 0 without client auth.
  int64_t NumTenants() const { return static_cast<int64_t>(tenants.size()) + (client_token.empty() ? 0 : 1); }
};
// Reads the files; errors name the setting and the path.
absl::StatusOr<ServerSecurity> LoadServerSecurity(const SecuritySettings& settings);

// FailedPrecondition when `bind_address` is reachable from other hosts and
// neither auth (both tokens) nor TLS is on, unless `insecure`: the message
// names both ways on and the opt-out.
absl::Status CheckBindAddress(const std::string& program, const std::string& bind_address,
                              const ServerSecurity& security);
bool IsLoopbackAddress(const std::string& bind_address);

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security);
// How this daemon calls the other daemons: the cluster token, and with TLS
// the CA and its own certificate (mutual TLS).
ChannelSecurity ClusterChannelSecurity(const ServerSecurity& security);

}  // namespace sluice

#endif  // SLUICE_SERVICE_SERVER_SECURITY_H_
