// dispatcherd: parses flags and config, then serves until SIGTERM/SIGINT.
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>

#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/grpc_dispatcher_impl.h"
#include "dispatcher/task_pusher.h"
#include "service/daemon.h"

int main(int argc, char** argv) {
  sluice::dispatcher::DispatcherConfig config;
  sluice::ConfigSchema schema("dispatcher");
  sluice::dispatcher::DescribeDispatcherConfig(&config, &schema);
  if (int code =
          sluice::SetUpDaemon(argc, argv, "dispatcherd", "the Sluice dispatcher", schema, config.log_level);
      code >= 0) {
    return code;
  }
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
  sluice::dispatcher::GrpcDispatcherImpl service(&impl);
  return sluice::ServeUntilShutdown(
      "dispatcherd", {config.bind_address, static_cast<int>(config.port), config.port_file}, {&service});
}
