#include "service/server_security.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace sluice {

void DescribeSecuritySettings(SecuritySettings* settings, ConfigSchema* schema) {
  schema->AddString("auth.cluster_token_file", &settings->cluster_token_file,
                    "file holding the token that workers and the dispatcher present to each other");
  schema->AddString("auth.client_token_file", &settings->client_token_file,
                    "file holding the token that clients present");
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
  const bool auth = !security.cluster_token.empty() && !security.client_token.empty();
  if (!IsLoopbackAddress(bind_address) && security.tls && !auth && !security.require_client_cert &&
      !security.insecure) {
    spdlog::warn(
        "TLS without tokens or tls.require_client_cert encrypts the calls but authenticates no caller: "
        "anyone who can reach {} can use the service",
        bind_address);
  }
  if (IsLoopbackAddress(bind_address) || auth || security.tls || security.insecure) return absl::OkStatus();
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
