// The token check at the transport: a call whose token its method would
// refuse is refused when its headers arrive, before gRPC reads its body.
//
// gRPC hands a unary call to its handler only once the whole request is
// read, so a stranger's 200 MiB requests were held up to the server's
// transport quota before any handler could refuse them (issue 50, finding
// 8). The gate runs as the server credentials' auth metadata processor, on
// the headers alone: it makes the same decision as the handler's
// RpcAuthenticator::Check, with the same message, and the body is dropped
// with the stream. Health checks and reflection stay open, as before.
// gRPC does not tell the processor the caller's address, so its refusals
// are logged without one.
#ifndef SLUICE_SERVICE_CALL_GATE_H_
#define SLUICE_SERVICE_CALL_GATE_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "service/rpc_auth.h"
#include "service/server_security.h"

namespace sluice {

// The token a method of this daemon's service takes; nullopt for a name
// that is none of its methods.
using RpcRoleOf = std::function<std::optional<RpcRole>(absl::string_view method)>;

class CallGate final : public grpc::AuthMetadataProcessor {
 public:
  // `service`: the full name of the daemon's service
  // ("sluice.proto.WorkerService"), whose methods `role_of` knows.
  CallGate(std::shared_ptr<const RpcAuthenticator> auth, std::string service, RpcRoleOf role_of);

  // The check is a few hashes: it runs on gRPC's own thread.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_metadata, OutputMetadata* response_metadata) override;

  // The decision on a call to `path` ("/package.Service/Method") with this
  // "authorization" header: OK, or the handler's Unauthenticated error. A
  // path that is not one of the service's methods is named only as "a
  // method this daemon does not serve" (the name is the caller's text),
  // takes a client token, and is not counted in the metrics.
  absl::Status Decide(absl::string_view path, std::optional<absl::string_view> authorization) const;

 private:
  const std::shared_ptr<const RpcAuthenticator> auth_;
  const std::string method_prefix_;  // "/" + service + "/"
  const RpcRoleOf role_of_;
};

// The credentials `security` asks for (TLS or none), with `gate` checking
// every call's token before its body is read.
std::shared_ptr<grpc::ServerCredentials> GatedServerCredentials(const ServerSecurity& security,
                                                                std::shared_ptr<CallGate> gate);

}  // namespace sluice

#endif  // SLUICE_SERVICE_CALL_GATE_H_
