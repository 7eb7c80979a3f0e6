// How a Sluice process authenticates itself when it calls a daemon: a
// bearer token sent with every call (read from a file, never a flag, so it
// does not show in `ps`) and optionally TLS. Daemons set theirs from their
// config (the cluster token); clients (the CLI, the SDK, the Python
// package) take it from the environment unless told otherwise:
//
//   SLUICE_TOKEN_FILE      the client token
//   SLUICE_TLS_CA_FILE     CA certificates to verify the daemons with (turns TLS on)
//   SLUICE_TLS_CERT_FILE   a client certificate, for mutual TLS
//   SLUICE_TLS_KEY_FILE    its private key
//   SLUICE_TLS_SERVER_NAME the name the daemons' certificates carry, when
//                          they are reached by addresses the certificates
//                          cannot list (workers at pod IPs)
#ifndef SLUICE_SERVICE_CHANNEL_SECURITY_H_
#define SLUICE_SERVICE_CHANNEL_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace sluice {

struct ChannelSecurity {
  // Sent as "authorization: Bearer TOKEN"; empty: none is sent.
  std::string token;
  bool tls = false;
  std::string ca_pem;    // empty with tls: the system's roots
  std::string cert_pem;  // with key_pem: a client certificate
  std::string key_pem;
  // With tls: the name to verify the peer's certificate against instead
  // of the address's host.
  std::string server_name;
};

// Where a client's security comes from: file paths, any of them empty.
struct ChannelSecurityFiles {
  std::string token_file;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
};
// Reads the files; errors name the setting and the path.
absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const ChannelSecurityFiles& files);
// The SLUICE_* variables above, as files.
ChannelSecurityFiles ChannelSecurityFilesFromEnvironment();

// Reads a secret (a token): the file's text without surrounding
// whitespace. InvalidArgument naming `what` and the path when it cannot be
// read, is empty or is longer than 4 KiB. Logs a warning when others may
// read the file.
absl::StatusOr<std::string> ReadSecretFile(const std::string& what, const std::string& path);
// A PEM file's contents; errors name `what` and the path.
absl::StatusOr<std::string> ReadPemFile(const std::string& what, const std::string& path);

// What MakeChannel(address) uses: what SetDefaultChannelSecurity set, else
// the environment's, read again whenever a SLUICE_* variable or one of its
// files changed (a notebook that sets SLUICE_TOKEN_FILE after a first call,
// a rotated token). An error reading the environment's files is returned
// here, so that a client's call can report it.
absl::StatusOr<ChannelSecurity> DefaultChannelSecurity();
void SetDefaultChannelSecurity(ChannelSecurity security);

// A channel to "host:port" with `security`, the receive limit raised from
// gRPC's 4 MiB default (batches of tensors are routinely larger). With
// `own_connection` the channel opens a TCP connection of its own rather
// than sharing one with the process's other channels to `address`. With
// `idle_timeout_ms` > 0 a channel without calls for that long lets its
// connection go, and stops trying to reconnect to a peer that is gone.
std::shared_ptr<grpc::Channel> MakeSecureChannel(const std::string& address, const ChannelSecurity& security,
                                                 bool own_connection = false, int idle_timeout_ms = 0);

}  // namespace sluice

#endif  // SLUICE_SERVICE_CHANNEL_SECURITY_H_
