#include "service/daemon.h"

#include <signal.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/json.h"
#include "common/strings.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "pipeline/builder.h"
#include "pipeline/sandbox.h"
#include "service/grpc_util.h"
#include "service/metrics.h"
#include "service/object_storage_config.h"
#include "service/tenant_sandboxes.h"

namespace sluice {

void TurnOffMutexDeadlockDetection() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

void BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int WaitForShutdownSignal() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

absl::Status CheckLogLevel(const std::string& level) {
  // from_str maps anything unknown to "off"; only "off" itself may.
  if (spdlog::level::from_str(level) == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown log level '", level, "' (valid: trace, debug, info, warn, error, off)"));
  }
  return absl::OkStatus();
}

absl::Status SetLogLevel(const std::string& level) {
  if (absl::Status status = CheckLogLevel(level); !status.ok()) return status;
  spdlog::set_level(spdlog::level::from_str(level));
  return absl::OkStatus();
}

namespace {

// Written to a temporary name and renamed, so readers never see half.
absl::Status WritePortFile(const std::string& path, int port) {
  if (path.empty()) return absl::OkStatus();
  const std::string temporary = path + ".tmp";
  std::ofstream(temporary) << port << "\n";
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write port file '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// %* in a pattern: the message as a JSON string (quoted and escaped).
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string quoted;
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), &quoted);
    dest.append(quoted.data(), quoted.data() + quoted.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

// %* in the text pattern: the message with its control characters
// escaped, so that a file name or a request's field it quotes cannot
// start a forged line.
class EscapedMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string escaped =
        EscapeControlCharacters(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessageFlag>();
  }
};

}  // namespace

absl::Status SetLogFormat(const std::string& format) {
  if (format == "text") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<EscapedMessageFlag>('*').set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %*");
    spdlog::set_formatter(std::move(formatter));
    return absl::OkStatus();
  }
  if (format != "json") {
    return absl::InvalidArgumentError(absl::StrCat("unknown log format '", format, "' (valid: text, json)"));
  }
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<JsonMessageFlag>('*').set_pattern(
      R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","pid":%P,"thread":%t,"message":%*})");
  spdlog::set_formatter(std::move(formatter));
  return absl::OkStatus();
}

void DescribeHttpSettings(HttpSettings* settings, ConfigSchema* schema) {
  schema->AddInt("http_port", &settings->http_port, -1, 65535,
                 "HTTP port for /metrics (and the dispatcher's status page); 0 picks a free one, -1 is off");
  schema->AddString(
      "http_bind_address", &settings->http_bind_address,
      "address of the HTTP port, which has no auth or TLS: open it to the monitoring network only");
  schema->AddStringList("http_host_names", &settings->http_host_names,
                        "DNS names the HTTP port answers to besides IP addresses, localhost and the host's "
                        "name (others get 421, against DNS rebinding)");
  schema->AddString("http_port_file", &settings->http_port_file,
                    "file to write the bound HTTP port to (for scripts using http_port 0)");
  schema->AddString("log_format", &settings->log_format, "text or json (one JSON object per line)",
                    [](const std::string& format) {
                      return format == "text" || format == "json"
                                 ? absl::OkStatus()
                                 : absl::InvalidArgumentError(
                                       absl::StrCat("unknown log format '", format, "' (valid: text, json)"));
                    });
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const ServerOptions& options,
                                                          const std::vector<grpc::Service*>& services,
                                                          int* bound_port) {
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(options.bind_address, ":", options.port);
  // Probes (Kubernetes' grpc probes, grpc_health_probe) and grpcurl-style
  // tools work on both daemons; neither needs a token.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  builder.AddListeningPort(
      address,
      options.rpc_roles
          ? GatedServerCredentials(
                options.security,
                std::make_shared<CallGate>(std::make_shared<RpcAuthenticator>(options.security.cluster_token,
                                                                              options.security.client_token,
                                                                              options.security.tenants),
                                           options.rpc_service, options.rpc_roles))
          : MakeServerCredentials(options.security),
      bound_port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // Past the quota gRPC shrinks its flow-control windows, so senders wait,
  // and then closes connections, rather than buffer without bound.
  grpc::ResourceQuota transport_memory("sluice-server");
  transport_memory.Resize(kServerTransportMemoryBytes);
  builder.SetResourceQuota(transport_memory);
  // gRPC sets SO_REUSEPORT by default, so a second daemon on a port in use
  // would start and take half the calls: two dispatchers answering in
  // turn, or a doubled worker. A port in use must be a startup error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound_port == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on ", address, ": the port is in use, or the address is not one of this host's"));
  }
  spdlog::info(
      "listening on {}:{} ({}{})", options.bind_address, *bound_port,
      options.security.tls ? (options.security.require_client_cert ? "mutual TLS" : "TLS") : "no TLS",
      options.security.client_token.empty() && options.security.cluster_token.empty() ? ", no auth"
                                                                                      : ", token auth");
  return server;
}

absl::StatusOr<ServerSecurity> PrepareServerSecurity(const std::string& program,
                                                     const std::string& bind_address,
                                                     const SecuritySettings& settings) {
  absl::StatusOr<ServerSecurity> security = LoadServerSecurity(settings);
  if (!security.ok()) return security.status();
  if (absl::Status status = CheckBindAddress(program, bind_address, *security); !status.ok()) return status;
  if (security->insecure && !IsLoopbackAddress(bind_address) && !security->tls &&
      (security->client_token.empty() || security->cluster_token.empty())) {
    spdlog::warn("insecure: listening on {} without {}", bind_address,
                 security->client_token.empty() && security->cluster_token.empty() ? "authentication or TLS"
                                                                                   : "both tokens or TLS");
  }
  SetDefaultChannelSecurity(ClusterChannelSecurity(*security));
  return security;
}

absl::Status SetUpPipelineSandbox(const std::string& owner, const std::vector<std::string>& plugins,
                                  const std::vector<std::string>& data_roots, const std::string& cache_dir) {
  for (const std::string& plugin : plugins) {
    if (absl::Status status = LoadPlugin(plugin); !status.ok()) return status;
  }
  absl::StatusOr<std::vector<std::string>> roots = CanonicalDataRoots(data_roots);
  if (!roots.ok()) return roots.status();
  if (roots->empty()) {
    spdlog::warn(
        "no data_roots: file sources in pipelines that clients send may read any file this user can");
  } else {
    spdlog::info("file sources read only under {}", absl::StrJoin(*roots, ", "));
  }
  std::string canonical_cache_dir;
  if (!cache_dir.empty()) {
    absl::StatusOr<std::string> canonical = CanonicalCacheDir(cache_dir);
    if (!canonical.ok()) return canonical.status();
    canonical_cache_dir = *std::move(canonical);
    spdlog::info("pipelines write file caches only under {}", canonical_cache_dir);
  }
  SetPipelineSandbox({.enabled = true,
                      .data_roots = *std::move(roots),
                      .cache_dir = std::move(canonical_cache_dir),
                      .owner = owner});
  return absl::OkStatus();
}

int WaitForShutdownSignalOr(const std::function<bool()>& done) {
  if (!done) return WaitForShutdownSignal();
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  const timespec tick{0, 50 * 1000 * 1000};
  while (!done()) {
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal > 0) return signal;
  }
  return 0;
}

int SetUpDaemon(int argc, char** argv, const std::string& program, const std::string& description,
                ConfigSchema& schema, const std::string& log_level, DaemonSettings* common) {
  TurnOffMutexDeadlockDetection();
  BlockShutdownSignals();
  DescribeSecuritySettings(&common->security, &schema);
  DescribeHttpSettings(&common->http, &schema);
  AddObjectStorageSettings(&schema, &common->object_storage);
  if (int code = ParseDaemonConfig(argc, argv, program + ": " + description, schema, kServerVersion);
      code >= 0) {
    return code;
  }
  for (const absl::Status& status : {SetLogLevel(log_level), SetLogFormat(common->http.log_format),
                                     SetUpObjectStorage(common->object_storage)}) {
    if (!status.ok()) {
      std::cerr << program << ": " << status.message() << "\n";
      return kConfigErrorExitCode;
    }
  }
  return -1;
}

absl::StatusOr<ServerSecurity> SecureDaemon(const std::string& program, const std::string& bind_address,
                                            const SecuritySettings& settings, const std::string& owner,
                                            const std::vector<std::string>& plugins,
                                            const std::vector<std::string>& data_roots,
                                            const std::string& cache_dir) {
  absl::StatusOr<ServerSecurity> security = PrepareServerSecurity(program, bind_address, settings);
  if (!security.ok()) return security.status();
  if (absl::Status status = SetUpPipelineSandbox(owner, plugins, data_roots, cache_dir); !status.ok()) {
    return status;
  }
  if (absl::Status status = SetUpTenantSandboxes(*security, CurrentPipelineSandbox()); !status.ok()) {
    return status;
  }
  return security;
}

HttpRoutes HttpRoutesFor(const std::map<std::string, CallerHttpHandler>& routes,
                         const RpcAuthenticator& auth) {
  std::map<std::string, CallerHttpHandler> all = routes;
  all["/metrics"] = [](const HttpRequest&, const Caller& caller) {
    MetricsRegistry& metrics = ProcessMetrics();
    return HttpResponse{200, kMetricsContentType,
                        caller.SeesAll() ? metrics.Render() : metrics.RenderForTenant(*caller.tenant)};
  };
  HttpRoutes checked;
  for (auto& [path, handler] : all) {
    checked[path] = [&auth, handler = std::move(handler)](const HttpRequest& request) {
      const auto authorization = request.headers.find("authorization");
      absl::StatusOr<Caller> caller =
          auth.CheckHttp(authorization == request.headers.end() ? "" : authorization->second);
      if (!caller.ok()) {
        return HttpResponse{401,
                            "text/plain; charset=utf-8",
                            absl::StrCat(caller.status().message(), "\n"),
                            {{"WWW-Authenticate", "Basic realm=\"sluice\", charset=\"UTF-8\""}}};
      }
      return handler(request, *caller);
    };
  }
  return checked;
}

int ServeUntilShutdown(const std::string& program, const ServerOptions& options,
                       const std::vector<grpc::Service*>& services,
                       const std::function<absl::Status(int port)>& started,
                       const std::function<void()>& stopping, const DrainHooks& drain) {
  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = StartServer(options, services, &port);
  if (!server.ok()) {
    std::cerr << program << ": " << server.status().message() << "\n";
    return kConfigErrorExitCode;
  }
  const RpcAuthenticator http_auth(options.security.cluster_token, options.security.client_token,
                                   options.security.tenants, options.security.metrics_token);
  std::unique_ptr<HttpServer> http;
  if (options.http.http_port >= 0) {
    const bool http_needs_token = !options.security.client_token.empty() || !options.security.tenants.empty();
    if (!IsLoopbackAddress(options.http.http_bind_address) && !http_needs_token) {
      spdlog::warn(
          "the HTTP port on {} has no auth or TLS: /metrics, /healthz and the status page (jobs, workers, "
          "errors) are open to anyone who can reach it; keep it on the monitoring network",
          options.http.http_bind_address);
    } else if (!IsLoopbackAddress(options.http.http_bind_address)) {
      spdlog::warn(
          "the HTTP port on {} is plain HTTP: the tokens that /metrics and the status page ask for cross "
          "the network in the clear; keep it on the monitoring network",
          options.http.http_bind_address);
    }
    absl::StatusOr<std::unique_ptr<HttpServer>> started_http =
        HttpServer::Start(options.http.http_bind_address, static_cast<int>(options.http.http_port),
                          HttpRoutesFor(options.http_routes, http_auth), options.http.http_host_names);
    if (!started_http.ok()) {
      std::cerr << program << ": http_port: " << started_http.status().message() << "\n";
      return kConfigErrorExitCode;
    }
    http = *std::move(started_http);
    spdlog::info("metrics at http://{}:{}/metrics", options.http.http_bind_address, http->port());
    if (absl::Status status = WritePortFile(options.http.http_port_file, http->port()); !status.ok()) {
      std::cerr << program << ": " << status.message() << "\n";
      return kConfigErrorExitCode;
    }
  }
  if (started) {
    if (absl::Status status = started(port); !status.ok()) {
      std::cerr << program << ": " << status.message() << "\n";
      return 1;
    }
  }
  // Written last, so that a script or a test that waits for the file finds
  // a daemon ready to serve: a worker already registered with its
  // dispatcher, which a read started at once would otherwise miss.
  if (absl::Status status = WritePortFile(options.port_file, port); !status.ok()) {
    std::cerr << program << ": " << status.message() << "\n";
    return kConfigErrorExitCode;
  }
  int signal = WaitForShutdownSignalOr(drain.done);
  if (signal == SIGTERM && drain.begin) {
    spdlog::info("signal {}: draining; SIGTERM or SIGINT again shuts down at once", signal);
    drain.begin();
    signal = WaitForShutdownSignalOr(drain.done);
  }
  if (signal != 0) {
    spdlog::info("signal {}: shutting down", signal);
  } else {
    spdlog::info("drained: shutting down");
  }
  if (stopping) stopping();
  if (http != nullptr) http->Stop();
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace sluice
