// What dispatcherd and workerd share around their services: reading the
// config file before the flags that override it, logging setup, binding
// (port 0 picks a free port, logged and optionally written to a file), and
// waiting for SIGTERM/SIGINT to shut down cleanly.
#ifndef SLUICE_SERVICE_DAEMON_H_
#define SLUICE_SERVICE_DAEMON_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/command_line.h"  // ParseDaemonConfig, kConfigErrorExitCode
#include "config/config_schema.h"
#include "pipeline/io/object_storage_settings.h"
#include "service/call_gate.h"
#include "service/http_server.h"
#include "service/rpc_auth.h"
#include "service/server_security.h"

namespace sluice {

// Blocks SIGTERM and SIGINT in this thread and every thread it starts later,
// so that WaitForShutdownSignal receives them. Call first thing in main.
void BlockShutdownSignals();
// Returns the signal number once SIGTERM or SIGINT arrives.
int WaitForShutdownSignal();
// The same, or 0 once `done` (asked every 50 ms) says true.
int WaitForShutdownSignalOr(const std::function<bool()>& done);

// Turns off absl::Mutex's deadlock detection for this process. Debian builds
// abseil without NDEBUG, which leaves the detection on: every lock and unlock
// then updates a global lock graph under one spin lock, a cost on every hot
// path. The daemons, the CLI and the benchmarks call this first thing; tests
// keep the detection.
void TurnOffMutexDeadlockDetection();

// "trace", "debug", "info", "warn", "error", "off".
absl::Status SetLogLevel(const std::string& level);
// SetLogLevel's check alone, for the config schema.
absl::Status CheckLogLevel(const std::string& level);

// http_port, http_bind_address, http_port_file and log_format, which both
// daemons take.
struct HttpSettings {
  // -1: no HTTP server; 0: a free port (logged, and written to
  // http_port_file when set).
  int64_t http_port = -1;
  // Apart from bind_address: the port has no auth or TLS, so it stays on
  // loopback unless the operator opens it (to the monitoring network).
  std::string http_bind_address = "127.0.0.1";
  // Names the port answers to besides IP addresses, localhost and the
  // host's name (HttpServer::Start's DNS-rebinding guard).
  std::vector<std::string> http_host_names;
  std::string http_port_file;
  std::string log_format = "text";
};
void DescribeHttpSettings(HttpSettings* settings, ConfigSchema* schema);
// "text" (spdlog's default lines) or "json" (one object per line).
absl::Status SetLogFormat(const std::string& format);

// The settings both daemons take besides their own.
struct DaemonSettings {
  SecuritySettings security;
  HttpSettings http;
  io::ObjectStorageSettings object_storage;  // object_storage.*: s3:// and https:// sources
};

// What both daemons' mains do first: turn off mutex deadlock detection,
// block the shutdown signals, add `common`'s settings to `schema`, parse
// `argv` into the schema's fields (ParseDaemonConfig, with "PROGRAM:
// DESCRIPTION" as its help line), then set the log level that parsing left
// in `log_level` and the log format. Returns the exit code to stop with, or
// -1 to go on. Call before any thread starts.
int SetUpDaemon(int argc, char** argv, const std::string& program, const std::string& description,
                ConfigSchema& schema, const std::string& log_level, DaemonSettings* common);

// What both daemons do once configured, before serving: PrepareServerSecurity,
// then SetUpPipelineSandbox. Errors (printed after "PROGRAM: ") are the
// operator's to fix: exit with kConfigErrorExitCode.
absl::StatusOr<ServerSecurity> SecureDaemon(const std::string& program, const std::string& bind_address,
                                            const SecuritySettings& settings, const std::string& owner,
                                            const std::vector<std::string>& plugins,
                                            const std::vector<std::string>& data_roots,
                                            const std::string& cache_dir = "");

// A route of the HTTP port that answers each caller with what it may see.
using CallerHttpHandler = std::function<HttpResponse(const HttpRequest&, const Caller&)>;

// `routes` and /metrics, each behind `auth`'s CheckHttp: a request it
// refuses is answered 401 with a WWW-Authenticate header, so that a
// browser asks for the token. /metrics shows the cluster token everything
// and a tenant the samples labelled with its name. `auth` must outlive the
// routes.
HttpRoutes HttpRoutesFor(const std::map<std::string, CallerHttpHandler>& routes,
                         const RpcAuthenticator& auth);

struct ServerOptions {
  std::string bind_address;
  int port = 0;
  std::string port_file;
  ServerSecurity security;
  HttpSettings http;
  // Served beside /metrics and /healthz on the HTTP port, each request
  // with the caller its token names (HttpRoutesFor).
  std::map<std::string, CallerHttpHandler> http_routes;
  // The served service's full name and the token each of its methods
  // takes: with them, a call whose token would be refused is refused
  // before its body is read (service/call_gate.h). Unset: only the
  // handlers check.
  std::string rpc_service;
  RpcRoleOf rpc_roles;
};

// Loads `settings`, refuses an unsafe bind address (CheckBindAddress) and
// makes the cluster token and TLS what this process's channels to the
// other daemons use. Errors are the operator's to fix: exit with
// kConfigErrorExitCode.
absl::StatusOr<ServerSecurity> PrepareServerSecurity(const std::string& program,
                                                     const std::string& bind_address,
                                                     const SecuritySettings& settings);

// Loads the operator's `plugins`, then turns the pipeline sandbox on
// (pipeline/sandbox.h): from here a pipeline never loads a library and
// file sources read only under `data_roots` (warned about when empty) and
// file caches are written only under `cache_dir` (none when empty).
// `owner` names this daemon in refusals. Errors name the plugin, root or
// cache_dir.
absl::Status SetUpPipelineSandbox(const std::string& owner, const std::vector<std::string>& plugins,
                                  const std::vector<std::string>& data_roots,
                                  const std::string& cache_dir = "");

// Starts a server for `services`, with gRPC's health service
// (grpc.health.v1, serving) and server reflection; *bound_port is the port
// it listens on.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const ServerOptions& options,
                                                          const std::vector<grpc::Service*>& services,
                                                          int* bound_port);

// A daemon that drains before it leaves (workerd): the first SIGTERM calls
// `begin` instead of shutting down, and the daemon shuts down once `done`
// says so, or at the next SIGTERM or SIGINT. `done` may say so with no
// signal at all (a drain the dispatcher asked for). SIGINT alone still
// shuts down at once.
struct DrainHooks {
  std::function<void()> begin;
  std::function<bool()> done;
};

// What a daemon's main does once configured: starts the server, calls
// `started(port)` (a worker registers with its dispatcher there), serves
// until SIGTERM or SIGINT (or the end of a drain, with `drain`), calls
// `stopping()`, and shuts the server down. Returns the exit code:
// kConfigErrorExitCode when the server cannot start (a port in use), 1
// when `started` fails, else 0. Errors are printed to stderr after
// "PROGRAM: ".
int ServeUntilShutdown(const std::string& program, const ServerOptions& options,
                       const std::vector<grpc::Service*>& services,
                       const std::function<absl::Status(int port)>& started = nullptr,
                       const std::function<void()>& stopping = nullptr, const DrainHooks& drain = {});

}  // namespace sluice

#endif  // SLUICE_SERVICE_DAEMON_H_
