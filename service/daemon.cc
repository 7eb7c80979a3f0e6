#include "service/daemon.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <fstream>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "service/grpc_util.h"

namespace sluice {

void TurnOffMutexDeadlockDetection() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

int ParseDaemonConfig(int argc, char** argv, const std::string& description, ConfigSchema& schema) {
  // The file is read before the flags are parsed, so that flags win.
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) config_path = argv[i + 1];
    if (std::strncmp(argv[i], "--config=", 9) == 0) config_path = argv[i] + 9;
  }
  CLI::App app{description};
  app.add_option("--config", config_path, "YAML file with settings; flags override it");
  schema.AddFlags(app);
  if (!config_path.empty()) {
    const bool wants_help = std::any_of(argv + 1, argv + argc, [](const char* a) {
      return std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0;
    });
    if (!wants_help) {
      if (absl::Status status = schema.LoadYamlFile(config_path); !status.ok()) {
        std::cerr << argv[0] << ": " << status.message() << "\n";
        return kConfigErrorExitCode;
      }
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kConfigErrorExitCode;
  }
  if (absl::Status status = schema.Validate(); !status.ok()) {
    std::cerr << argv[0] << ": " << status.message() << "\n";
    return kConfigErrorExitCode;
  }
  return -1;
}

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

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const ServerOptions& options,
                                                          const std::vector<grpc::Service*>& services,
                                                          int* bound_port) {
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(options.bind_address, ":", options.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), bound_port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
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
  spdlog::info("listening on {}:{}", options.bind_address, *bound_port);
  if (!options.port_file.empty()) {
    // Written to a temporary name and renamed, so readers never see half.
    const std::string temporary = options.port_file + ".tmp";
    std::ofstream(temporary) << *bound_port << "\n";
    if (std::rename(temporary.c_str(), options.port_file.c_str()) != 0) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write port file '", options.port_file, "'"));
    }
  }
  return server;
}

int SetUpDaemon(int argc, char** argv, const std::string& program, const std::string& description,
                ConfigSchema& schema, const std::string& log_level) {
  TurnOffMutexDeadlockDetection();
  BlockShutdownSignals();
  if (int code = ParseDaemonConfig(argc, argv, program + ": " + description, schema); code >= 0) return code;
  if (absl::Status status = SetLogLevel(log_level); !status.ok()) {
    std::cerr << program << ": " << status.message() << "\n";
    return kConfigErrorExitCode;
  }
  return -1;
}

int ServeUntilShutdown(const std::string& program, const ServerOptions& options,
                       const std::vector<grpc::Service*>& services,
                       const std::function<absl::Status(int port)>& started,
                       const std::function<void()>& stopping) {
  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = StartServer(options, services, &port);
  if (!server.ok()) {
    std::cerr << program << ": " << server.status().message() << "\n";
    return kConfigErrorExitCode;
  }
  if (started) {
    if (absl::Status status = started(port); !status.ok()) {
      std::cerr << program << ": " << status.message() << "\n";
      return 1;
    }
  }
  const int signal = WaitForShutdownSignal();
  spdlog::info("signal {}: shutting down", signal);
  if (stopping) stopping();
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace sluice
