// An in-process gRPC server for tests: a fake worker or dispatcher on a
// free port of 127.0.0.1, without TLS.
#ifndef SLUICE_TESTS_TESTING_LOOPBACK_SERVER_H_
#define SLUICE_TESTS_TESTING_LOOPBACK_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <memory>

namespace sluice::testing {

// Serves `service` on a free port of 127.0.0.1; *port is the port.
inline std::unique_ptr<grpc::Server> ServeOnLoopback(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  return server;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_LOOPBACK_SERVER_H_
