// dispatcherd: parses flags and config, then serves until SIGTERM/SIGINT.
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>

#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/grpc_dispatcher_impl.h"
#include "dispatcher/status_page.h"
#include "dispatcher/status_views.h"
#include "dispatcher/task_pusher.h"
#include "pipeline/sandbox.h"
#include "service/daemon.h"
#include "service/metrics.h"
#include "service/python_settings.h"

int main(int argc, char** argv) {
  sluice::dispatcher::DispatcherConfig config;
  sluice::ConfigSchema schema("dispatcher");
  sluice::dispatcher::DescribeDispatcherConfig(&config, &schema);
  sluice::DaemonSettings common;
  if (int code = sluice::SetUpDaemon(argc, argv, "dispatcherd", "the Sluice dispatcher", schema,
                                     config.log_level, &common);
      code >= 0) {
    return code;
  }
  absl::StatusOr<sluice::ServerSecurity> security =
      sluice::SecureDaemon("dispatcherd", config.bind_address, common.security, "the dispatcher",
                           config.plugins, config.data_roots);
  if (!security.ok()) {
    std::cerr << "dispatcherd: " << security.status().message() << "\n";
    return sluice::kConfigErrorExitCode;
  }
  if (absl::Status status =
          sluice::SetUpPythonFunctions(config.python, "the dispatcher", false, security->NumTenants());
      !status.ok()) {
    std::cerr << "dispatcherd: " << status.message() << "\n";
    return sluice::kConfigErrorExitCode;
  }
  // Each tenant's quotas default to a fair share: the single client token
  // is one tenant, each of auth.clients another.
  sluice::dispatcher::ApplyTenantShares(security->NumTenants(), &config);
  const sluice::RpcAuthenticator auth(security->cluster_token, security->client_token, security->tenants);
  config.restore_key_secret = security->cluster_token;
  // Before any thread logs: the page's recent errors include recovery's.
  sluice::dispatcher::KeepRecentProblems();
  sluice::dispatcher::GrpcTaskPusher pusher;
  sluice::dispatcher::DispatcherImpl impl(
      config,
      [&pusher](const std::string& address, const sluice::proto::TaskDef& task) {
        pusher.Push(address, task);
      },
      [](const absl::Status& status) {
        // A restart recovers what is journaled; serving on would lose what
        // is not.
        spdlog::critical("{}; exiting", std::string(status.message()));
        std::_Exit(sluice::dispatcher::kJournalFailureExitCode);
      });
  // Recovery comes before serving: no request sees a half-restored state.
  if (absl::Status status = impl.Start(); !status.ok()) {
    std::cerr << "dispatcherd: " << status.message() << "\n";
    // A work dir another dispatcher holds is the operator's to fix.
    return absl::IsFailedPrecondition(status) ? sluice::kConfigErrorExitCode : 1;
  }
  sluice::dispatcher::GrpcDispatcherImpl service(&impl, &auth);
  impl.ExportMetrics(sluice::ProcessMetrics());
  sluice::ServerOptions options{config.bind_address, static_cast<int>(config.port), config.port_file,
                                *security, common.http};
  options.rpc_service = sluice::proto::DispatcherService::service_full_name();
  options.rpc_roles = sluice::dispatcher::DispatcherRpcRole;
  // The page and its data show no pipeline definitions: ids, names and
  // counts only. A tenant's token shows it its own (StatusJson).
  options.http_routes["/"] = [](const sluice::HttpRequest&, const sluice::Caller&) {
    return sluice::HttpResponse{200, "text/html; charset=utf-8",
                                std::string(sluice::dispatcher::StatusPageHtml())};
  };
  options.http_routes["/status.json"] = [&impl](const sluice::HttpRequest&, const sluice::Caller& caller) {
    return sluice::HttpResponse{200, "application/json", impl.StatusJson(caller)};
  };
  return sluice::ServeUntilShutdown("dispatcherd", options, {&service}, [&](int port) {
    sluice::SetPipelineSandboxOwner("dispatcher " + config.bind_address + ":" + std::to_string(port));
    return absl::OkStatus();
  });
}
