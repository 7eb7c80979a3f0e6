#include "service/channel_security.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/file_io.h"
#include "grpcpp/support/client_interceptor.h"
#include "service/grpc_util.h"

namespace sluice {
namespace {

constexpr size_t kMaxSecretBytes = 4096;
constexpr size_t kMaxPemBytes = size_t{1} << 20;

absl::StatusOr<std::string> ReadSmallFile(const std::string& what, const std::string& path, size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "': cannot read: ", std::strerror(error)));
  }
  std::string text;
  const int error = ReadToEnd(fd, limit, &text);
  ::close(fd);
  if (error == EFBIG) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "': longer than ", limit, " bytes"));
  }
  if (error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "': cannot read: ", std::strerror(error)));
  }
  return text;
}

// Adds the bearer token to every call's initial metadata.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

absl::Mutex default_mu(absl::kConstInit);
// What SetDefaultChannelSecurity set (a daemon's settings, the CLI's flags).
absl::StatusOr<ChannelSecurity>* default_security ABSL_GUARDED_BY(default_mu) = nullptr;

// The environment's settings as last loaded, and what they named: the
// variables and each file's size and modification time. A change to any
// loads them again, so a token set (or rotated) after a process's first
// call counts at its next connection, and an unchanged one is not re-read.
struct EnvironmentSecurity {
  std::vector<std::string> key;
  absl::StatusOr<ChannelSecurity> loaded;
};
EnvironmentSecurity* environment_security ABSL_GUARDED_BY(default_mu) = nullptr;

std::vector<std::string> EnvironmentKey(const ChannelSecurityFiles& files) {
  std::vector<std::string> key = {files.token_file, files.tls_ca_file, files.tls_cert_file,
                                  files.tls_key_file, files.tls_server_name};
  for (const std::string* path :
       {&files.token_file, &files.tls_ca_file, &files.tls_cert_file, &files.tls_key_file}) {
    struct stat info {};
    key.push_back(!path->empty() && stat(path->c_str(), &info) == 0
                      ? absl::StrCat(info.st_size, "@", info.st_mtim.tv_sec, ".", info.st_mtim.tv_nsec)
                      : "-");
  }
  return key;
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& what, const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(what, path, kMaxSecretBytes);
  if (!text.ok()) return text.status();
  std::string secret(absl::StripAsciiWhitespace(*text));
  if (secret.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "': the file is empty"));
  struct stat info {};
  if (stat(path.c_str(), &info) == 0 && (info.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    spdlog::warn("{} '{}' may be read by other users (mode {:o}); chmod 600 it", what, path,
                 info.st_mode & 0777);
  }
  return secret;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& what, const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(what, path, kMaxPemBytes);
  if (!text.ok()) return text.status();
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "': not a PEM file (no -----BEGIN line)"));
  }
  return text;
}

absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const ChannelSecurityFiles& files) {
  ChannelSecurity security;
  security.server_name = files.tls_server_name;
  if (!files.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadSecretFile("token file", files.token_file);
    if (!token.ok()) return token.status();
    security.token = *std::move(token);
  }
  if (files.tls_cert_file.empty() != files.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both its file and its key file (TLS cert and key)");
  }
  const std::pair<const std::string*, std::string*> pems[] = {{&files.tls_ca_file, &security.ca_pem},
                                                              {&files.tls_cert_file, &security.cert_pem},
                                                              {&files.tls_key_file, &security.key_pem}};
  const char* names[] = {"TLS CA file", "TLS certificate file", "TLS key file"};
  for (int i = 0; i < 3; ++i) {
    if (pems[i].first->empty()) continue;
    absl::StatusOr<std::string> pem = ReadPemFile(names[i], *pems[i].first);
    if (!pem.ok()) return pem.status();
    *pems[i].second = *std::move(pem);
    security.tls = true;
  }
  return security;
}

ChannelSecurityFiles ChannelSecurityFilesFromEnvironment() {
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  return {env("SLUICE_TOKEN_FILE"), env("SLUICE_TLS_CA_FILE"), env("SLUICE_TLS_CERT_FILE"),
          env("SLUICE_TLS_KEY_FILE"), env("SLUICE_TLS_SERVER_NAME")};
}

absl::StatusOr<ChannelSecurity> DefaultChannelSecurity() {
  {
    absl::MutexLock lock(&default_mu);
    if (default_security != nullptr) return *default_security;
  }
  // A client process: the environment's, its files stat'ed outside the lock.
  const ChannelSecurityFiles files = ChannelSecurityFilesFromEnvironment();
  std::vector<std::string> key = EnvironmentKey(files);
  absl::MutexLock lock(&default_mu);
  if (default_security != nullptr) return *default_security;
  if (environment_security == nullptr || environment_security->key != key) {
    absl::StatusOr<ChannelSecurity> loaded = LoadChannelSecurity(files);
    if (!loaded.ok()) {
      loaded = absl::Status(loaded.status().code(),
                            absl::StrCat("SLUICE_TOKEN_FILE/SLUICE_TLS_*: ", loaded.status().message()));
    }
    delete environment_security;
    environment_security = new EnvironmentSecurity{std::move(key), std::move(loaded)};
  }
  return environment_security->loaded;
}

void SetDefaultChannelSecurity(ChannelSecurity security) {
  absl::MutexLock lock(&default_mu);
  if (default_security == nullptr) {
    default_security = new absl::StatusOr<ChannelSecurity>(std::move(security));
  } else {
    *default_security = std::move(security);
  }
}

std::shared_ptr<grpc::Channel> MakeSecureChannel(const std::string& address, const ChannelSecurity& security,
                                                 bool own_connection, int idle_timeout_ms) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A restarted daemon is found within a second, not after gRPC's default
  // backoff of up to two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (idle_timeout_ms > 0) args.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS, idle_timeout_ms);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (security.tls) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = security.ca_pem;
    options.pem_private_key = security.key_pem;
    options.pem_cert_chain = security.cert_pem;
    credentials = grpc::SslCredentials(options);
    if (!security.server_name.empty()) args.SetSslTargetNameOverride(security.server_name);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  if (security.token.empty()) return grpc::CreateCustomChannel(address, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(security.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace sluice
