#include "dispatcher/grpc_dispatcher_impl.h"

#include "absl/container/flat_hash_set.h"
#include "service/grpc_util.h"
#include "service/message_bytes.h"
#include "service/rpc_metrics.h"

namespace sluice::dispatcher {

std::optional<RpcRole> DispatcherRpcRole(absl::string_view method) {
#define SLUICE_RPC_NAME(Method, Request, Response) #Method,
  static const auto* all_rpcs =
      new absl::flat_hash_set<absl::string_view>{SLUICE_DISPATCHER_RPCS(SLUICE_RPC_NAME)};
#undef SLUICE_RPC_NAME
  static const auto* client_rpcs = new absl::flat_hash_set<absl::string_view>{
      "GetVersion",      "GetOrRegisterDataset",   "GetDatasetInfo", "GetOrCreateJob", "GetOrCreateIteration",
      "ClientHeartbeat", "ReleaseIterationClient", "GetWorkers",     "GetStatus"};
  if (!all_rpcs->contains(method)) return std::nullopt;
  return client_rpcs->contains(method) ? RpcRole::kClient : RpcRole::kCluster;
}

#define SLUICE_DEFINE_RPC(Method, Request, Response)                                                       \
  grpc::ServerUnaryReactor* GrpcDispatcherImpl::Method(                                                    \
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request, grpc::ByteBuffer* response) { \
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();                                         \
    const auto start = std::chrono::steady_clock::now();                                                   \
    Caller caller;                                                                                         \
    absl::Status authorized = auth_->Check(*context, #Method, *DispatcherRpcRole(#Method), &caller);       \
    if (!authorized.ok()) {                                                                                \
      RecordRpc(#Method, authorized, start);                                                               \
      reactor->Finish(ToGrpcStatus(authorized));                                                           \
      return reactor;                                                                                      \
    }                                                                                                      \
    calls_.Schedule([this, reactor, request, response, start, caller = std::move(caller)] {                \
      proto::Request parsed;                                                                               \
      absl::Status status = ParseRequest(*request, #Method, &parsed);                                      \
      proto::Response answer;                                                                              \
      if (status.ok()) status = impl_->Method(parsed, &answer, caller);                                    \
      if (status.ok()) *response = SerializeToByteBuffer(answer);                                          \
      RecordRpc(#Method, status, start);                                                                   \
      reactor->Finish(ToGrpcStatus(status));                                                               \
    });                                                                                                    \
    return reactor;                                                                                        \
  }
SLUICE_DISPATCHER_RPCS(SLUICE_DEFINE_RPC)
#undef SLUICE_DEFINE_RPC

}  // namespace sluice::dispatcher
