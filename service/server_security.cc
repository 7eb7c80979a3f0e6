#include "service/server_security.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice {

void DescribeSecuritySettings(SecuritySettings* settings, ConfigSchema* schema) {
  schema->AddString("auth.cluster_token_file", &settings->cluster_token_file,
                    "file holding the token that workers and the dispatcher present to each other");
  schema->AddString("auth.client_token_file", &settings->client_token_file,
                    "file holding the token that clients present");
  schema->AddString("auth.metrics_token_file", &settings->metrics_token_file,
                    "file holding a token that reads the HTTP port's /metrics and status page of the whole "
                    "cluster and calls no RPC (for Prometheus)");
  schema->AddString("tls.cert_file", &settings->tls_cert_file, "PEM certificate (chain) this daemon serves");
  schema->AddString("tls.key_file", &settings->tls_key_file, "PEM private key of tls.cert_file");
  schema->AddString(
      "tls.ca_file", &settings->tls_ca_file,
      "PEM CA certificates that verify peers (client certificates, and the daemons this one calls)");
  schema->AddBool("tls.require_client_cert", &settings->tls_require_client_cert,
                  "mutual TLS: refuse a client without a certificate signed by tls.ca_file");
  schema->AddString(
      "tls.server_name", &settings->tls_server_name,
      "name in the daemons' certificates to verify instead of the address (workers at pod IPs)");
  schema->AddRecordList(
      "auth.clients", {"name", "token_file", "data_roots", "cache_dir"}, &settings->clients,
      "tenants: each client token's name, whose datasets and jobs only its holders see; its "
      "own data_roots (besides the daemon's, which all share) and cache_dir",
      /*optional=*/{"data_roots", "cache_dir"}, /*lists=*/{"data_roots"});
  schema->AddBool("insecure", &settings->insecure,
                  "allow listening beyond loopback with neither auth nor TLS");
}

absl::StatusOr<ServerSecurity> LoadServerSecurity(const SecuritySettings& settings) {
  ServerSecurity security;
  security.insecure = settings.insecure;
  if (!settings.cluster_token_file.empty()) {
    absl::StatusOr<std::string> token =
        ReadSecretFile("auth.cluster_token_file", settings.cluster_token_file);
    if (!token.ok()) return token.status();
    security.cluster_token = *std::move(token);
  }
  if (!settings.client_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadSecretFile("auth.client_token_file", settings.client_token_file);
    if (!token.ok()) return token.status();
    security.client_token = *std::move(token);
  }
  if (!settings.metrics_token_file.empty()) {
    absl::StatusOr<std::string> token =
        ReadSecretFile("auth.metrics_token_file", settings.metrics_token_file);
    if (!token.ok()) return token.status();
    security.metrics_token = *std::move(token);
  }
  for (const ConfigSchema::Record& client : settings.clients) {
    const std::string& name = client.at("name");
    const bool valid_name =
        !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
        });
    if (!valid_name) {
      return absl::InvalidArgumentError(absl::StrCat("auth.clients: tenant name '", name,
                                                     "' must be 1 to 64 letters, digits, '-', '_' or '.'"));
    }
    for (const TenantToken& other : security.tenants) {
      if (other.name == name) {
        return absl::InvalidArgumentError(absl::StrCat("auth.clients: tenant '", name, "' is named twice"));
      }
    }
    const std::string what = absl::StrCat("auth.clients '", name, "' token_file");
    absl::StatusOr<std::string> token = ReadSecretFile(what, client.at("token_file"));
    if (!token.ok()) return token.status();
    const auto field = [&](const std::string& key) {
      const auto found = client.find(key);
      return found == client.end() ? std::string() : found->second;
    };
    security.tenants.push_back({.name = name,
                                .token = *std::move(token),
                                .data_roots = ConfigSchema::RecordItems(field("data_roots")),
                                .cache_dir = field("cache_dir")});
  }
  if (!security.tenants.empty() && security.cluster_token.empty()) {
    return absl::InvalidArgumentError(
        "auth.clients without auth.cluster_token_file would leave the worker RPCs open to anyone: set it "
        "too");
  }
  // Each token must name one role and one tenant.
  std::vector<std::pair<std::string, std::string>> tokens = {
      {"auth.cluster_token_file", security.cluster_token},
      {"auth.client_token_file", security.client_token},
      {"auth.metrics_token_file", security.metrics_token}};
  for (const TenantToken& tenant : security.tenants) {
    tokens.emplace_back(absl::StrCat("auth.clients '", tenant.name, "'"), tenant.token);
  }
  for (size_t i = 2; i < tokens.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (!tokens[j].second.empty() && tokens[i].second == tokens[j].second) {
        return absl::InvalidArgumentError(absl::StrCat(tokens[i].first, " and ", tokens[j].first,
                                                       " hold the same token: give each its own"));
      }
    }
  }
  if (!security.client_token.empty() && security.cluster_token.empty()) {
    return absl::InvalidArgumentError(
        "auth.client_token_file without auth.cluster_token_file would leave the worker RPCs open to anyone: "
        "set "
        "both");
  }
  if (!security.client_token.empty() && security.client_token == security.cluster_token) {
    return absl::InvalidArgumentError(
        "auth.client_token_file and auth.cluster_token_file hold the same token: a client could then act as "
        "a "
        "worker; give them different tokens");
  }
  const bool any_tls = !settings.tls_cert_file.empty() || !settings.tls_key_file.empty() ||
                       !settings.tls_ca_file.empty() || settings.tls_require_client_cert;
  if (!any_tls) return security;
  if (settings.tls_cert_file.empty() || settings.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both tls.cert_file and tls.key_file");
  }
  if (settings.tls_require_client_cert && settings.tls_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.require_client_cert needs tls.ca_file to verify client certificates");
  }
  security.tls = true;
  security.require_client_cert = settings.tls_require_client_cert;
  security.server_name = settings.tls_server_name;
  const std::pair<const char*, std::pair<const std::string*, std::string*>> files[] = {
      {"tls.cert_file", {&settings.tls_cert_file, &security.cert_pem}},
      {"tls.key_file", {&settings.tls_key_file, &security.key_pem}},
      {"tls.ca_file", {&settings.tls_ca_file, &security.ca_pem}}};
  for (const auto& [what, paths] : files) {
    if (paths.first->empty()) continue;
    absl::StatusOr<std::string> pem = ReadPemFile(what, *paths.first);
    if (!pem.ok()) return pem.status();
    *paths.second = *std::move(pem);
  }
  return security;
}

bool IsLoopbackAddress(const std::string& bind_address) {
  std::string host = bind_address;
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;  // a host name or an interface: assume it is reachable
}

absl::Status CheckBindAddress(const std::string& program, const std::string& bind_address,
                              const ServerSecurity& security) {
  const bool auth =
      !security.cluster_token.empty() && (!security.client_token.empty() || !security.tenants.empty());
  if (IsLoopbackAddress(bind_address) || auth || (security.tls && security.require_client_cert) ||
      security.insecure) {
    return absl::OkStatus();
  }
  // TLS alone encrypts the calls but authenticates no caller.
  if (security.tls) {
    return absl::FailedPreconditionError(absl::StrCat(
        program, " refuses to listen on ", bind_address,
        " with TLS but no client authentication: TLS encrypts the calls, yet anyone who can reach the port "
        "could register pipelines, read any job or pose as a worker. Add auth (auth.cluster_token_file and "
        "auth.client_token_file) or tls.require_client_cert; or, on a network you trust, opt out with "
        "'insecure: true' (--insecure)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(program, " refuses to listen on ", bind_address,
                                                    " without authentication or TLS: anyone who can reach "
                                                    "the port could register pipelines, read any job or "
                                                    "pose as a worker. Turn on auth (auth.cluster_token_file "
                                                    "and auth.client_token_file), or TLS (tls.cert_file "
                                                    "and tls.key_file, with tls.require_client_cert for "
                                                    "mutual TLS), or listen on 127.0.0.1; or, on a network "
                                                    "you trust, opt out with 'insecure: true' (--insecure)"));
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security) {
  if (!security.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(security.require_client_cert
                                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = security.ca_pem;
  options.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  return grpc::SslServerCredentials(options);
}

ChannelSecurity ClusterChannelSecurity(const ServerSecurity& security) {
  ChannelSecurity channel;
  channel.token = security.cluster_token;
  if (security.tls) {
    channel.tls = true;
    channel.ca_pem = security.ca_pem;
    channel.cert_pem = security.cert_pem;
    channel.key_pem = security.key_pem;
    channel.server_name = security.server_name;
  }
  return channel;
}

}  // namespace sluice
