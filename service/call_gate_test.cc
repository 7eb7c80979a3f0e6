// The token check at the transport (call_gate.h): its decisions, and on a
// real server, that a refused call never reaches a handler while health
// checks stay open.
#include "service/call_gate.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

std::optional<RpcRole> TestRoles(absl::string_view method) {
  if (method == "Read") return RpcRole::kClient;
  if (method == "Order") return RpcRole::kCluster;
  return std::nullopt;
}

CallGate GateWith(std::string cluster_token, std::string client_token) {
  return CallGate(std::make_shared<RpcAuthenticator>(std::move(cluster_token), std::move(client_token),
                                                     std::vector<TenantToken>{{"vision", "vision-token"}}),
                  "sluice.proto.S", TestRoles);
}

std::string Refusal(const absl::Status& status) {
  REQUIRE(status.code() == absl::StatusCode::kUnauthenticated);
  return std::string(status.message());
}

TEST_CASE("call gate: refuses what the handler would, with the handler's message", "[call_gate]") {
  const CallGate gate = GateWith("cluster-token", "client-token");
  CHECK(Refusal(gate.Decide("/sluice.proto.S/Read", std::nullopt)) ==
        "Read needs the client token and the call carried none (set SLUICE_TOKEN_FILE, or --token-file)");
  CHECK(Refusal(gate.Decide("/sluice.proto.S/Read", "Bearer nobody")) ==
        "Read needs the client token and the call carried a wrong one");
  CHECK(Refusal(gate.Decide("/sluice.proto.S/Read", "Basic Y2xpZW50LXRva2Vu")) ==
        "Read needs the client token and the call carried a wrong one");
  CHECK(gate.Decide("/sluice.proto.S/Read", "Bearer client-token").ok());
  CHECK(gate.Decide("/sluice.proto.S/Read", "Bearer vision-token").ok());
  CHECK(gate.Decide("/sluice.proto.S/Read", "Bearer cluster-token").ok());
  CHECK(Refusal(gate.Decide("/sluice.proto.S/Order", "Bearer vision-token")) ==
        "Order is a worker's RPC: it needs the cluster token, and the call carried the client token");
  CHECK(Refusal(gate.Decide("/sluice.proto.S/Order", std::nullopt)) ==
        "Order needs the cluster token and the call carried none");
  CHECK(gate.Decide("/sluice.proto.S/Order", "Bearer cluster-token").ok());
  // The caller's own method name is not repeated (nor logged): it could
  // carry a newline that forges log lines.
  CHECK(Refusal(gate.Decide("/sluice.proto.S/Evil\nforged line", std::nullopt)) ==
        "a method this daemon does not serve needs the client token and the call carried none (set "
        "SLUICE_TOKEN_FILE, or --token-file)");
  CHECK(gate.Decide("/sluice.proto.S/Unknown", "Bearer client-token").ok());  // gRPC says UNIMPLEMENTED
  // Another service's method of the same name is none of this daemon's.
  CHECK(gate.Decide("/other.Service/Order", "Bearer client-token").ok());
  CHECK(Refusal(gate.Decide("/other.Service/Read", std::nullopt)) ==
        "a method this daemon does not serve needs the client token and the call carried none (set "
        "SLUICE_TOKEN_FILE, or --token-file)");
  // Probes and reflection need no token.
  CHECK(gate.Decide("/grpc.health.v1.Health/Check", std::nullopt).ok());
  CHECK(gate.Decide("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", std::nullopt).ok());
  CHECK(Refusal(gate.Decide("/grpc.health.v1.HealthX/Check", std::nullopt)) ==
        "a method this daemon does not serve needs the client token and the call carried none (set "
        "SLUICE_TOKEN_FILE, or --token-file)");
}

TEST_CASE("call gate: without client tokens a client's RPC needs none, a worker's still the cluster token",
          "[call_gate]") {
  const CallGate cluster_only(std::make_shared<RpcAuthenticator>("cluster-token", ""), "sluice.proto.S",
                              TestRoles);
  CHECK(cluster_only.Decide("/sluice.proto.S/Read", std::nullopt).ok());
  CHECK(Refusal(cluster_only.Decide("/sluice.proto.S/Order", std::nullopt)) ==
        "Order needs the cluster token and the call carried none");
  const CallGate open(std::make_shared<RpcAuthenticator>("", ""), "sluice.proto.S", TestRoles);
  CHECK(open.Decide("/sluice.proto.S/Order", std::nullopt).ok());
  CHECK(open.Decide("/sluice.proto.S/Read", "Bearer anything").ok());
}

// Answers every call with the size of its request; counts the calls that
// reached it.
class SizeService final : public grpc::CallbackGenericService {
 public:
  std::atomic<int> calls{0};

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(std::atomic<int>* calls) : calls_(calls) { StartRead(&request_); }
      void OnReadDone(bool ok) override {
        if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "no request"));
        ++*calls_;
        response_ = grpc::ByteBuffer();
        const std::string size = std::to_string(request_.Length());
        grpc::Slice slice(size);
        response_ = grpc::ByteBuffer(&slice, 1);
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      std::atomic<int>* const calls_;
      grpc::ByteBuffer request_;
      grpc::ByteBuffer response_;
    };
    return new Reactor(&calls);
  }
};

grpc::Status Call(grpc::GenericStub* stub, const std::string& method, const std::string& body,
                  const std::string& token, std::string* answer) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub->UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                  [&done](grpc::Status status) { done.set_value(std::move(status)); });
  grpc::Status status = done.get_future().get();
  if (status.ok() && answer != nullptr) {
    std::vector<grpc::Slice> slices;
    REQUIRE(response.Dump(&slices).ok());
    answer->clear();
    for (const grpc::Slice& part : slices)
      answer->append(reinterpret_cast<const char*>(part.begin()), part.size());
  }
  return status;
}

TEST_CASE("call gate: on a server, a refused call never reaches the handler, and health checks stay open",
          "[call_gate]") {
  ServerSecurity security;
  security.cluster_token = "cluster-token";
  security.client_token = "client-token";
  SizeService service;
  int port = 0;
  // The builder, and with it the credentials object, goes once the server
  // runs, as in StartServer: the gate must live on with the server.
  std::unique_ptr<grpc::Server> server = [&] {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(
        "127.0.0.1:0",
        GatedServerCredentials(
            security, std::make_shared<CallGate>(
                          std::make_shared<RpcAuthenticator>(security.cluster_token, security.client_token),
                          "sluice.proto.S", TestRoles)),
        &port);
    builder.SetMaxReceiveMessageSize(128 << 20);
    builder.RegisterCallbackGenericService(&service);
    return builder.BuildAndStart();
  }();
  REQUIRE(server != nullptr);
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(128 << 20);
  grpc::GenericStub stub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
  const std::string body(size_t{64} << 20, 'x');

  const grpc::Status refused = Call(&stub, "/sluice.proto.S/Read", body, "", nullptr);
  CHECK(refused.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(refused.error_message() ==
        "Read needs the client token and the call carried none (set SLUICE_TOKEN_FILE, or --token-file)");
  const grpc::Status as_client = Call(&stub, "/sluice.proto.S/Order", body, "client-token", nullptr);
  CHECK(as_client.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(as_client.error_message() ==
        "Order is a worker's RPC: it needs the cluster token, and the call carried the client token");
  CHECK(service.calls == 0);

  std::string answer;
  REQUIRE(Call(&stub, "/sluice.proto.S/Read", body, "client-token", &answer).ok());
  CHECK(answer == std::to_string(body.size()));
  CHECK(service.calls == 1);

  // The health service answers without a token (an empty request: any service).
  grpc::GenericStub health(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  CHECK(Call(&health, "/grpc.health.v1.Health/Check", "", "", nullptr).ok());
  CHECK(service.calls == 1);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace sluice
