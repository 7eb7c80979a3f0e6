// The gRPC face of DispatcherImpl: one line per RPC.
//
// Every method takes its request as bytes and parses it itself
// (ParseRequest), so that a request protobuf cannot parse (a string that
// is not UTF-8, nesting past 100 messages) is InvalidArgument saying why
// rather than gRPC's INTERNAL with an empty message. The calls run on a
// pool of the adapter's own, not on gRPC's callback threads, since
// DispatcherImpl blocks on its lock and the journal.
#ifndef SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_
#define SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "common/thread_pool.h"
#include "dispatcher/dispatcher_impl.h"
#include "service/dispatcher_rpcs.h"
#include "service/rpc_auth.h"
#include "sluice/proto/service.grpc.pb.h"

namespace sluice::dispatcher {

// DispatcherService with every method a raw callback method: the
// generated WithRawCallbackMethod_X templates, nested.
#define SLUICE_OPEN_RAW(Method, Request, Response) proto::DispatcherService::WithRawCallbackMethod_##Method <
#define SLUICE_CLOSE_RAW(Method, Request, Response) >
using RawDispatcherService = SLUICE_DISPATCHER_RPCS(SLUICE_OPEN_RAW) proto::DispatcherService::Service
    SLUICE_DISPATCHER_RPCS(SLUICE_CLOSE_RAW);
#undef SLUICE_OPEN_RAW
#undef SLUICE_CLOSE_RAW

// The token each DispatcherService method takes: a client's RPCs take the
// client token (or the cluster token); every other one (a worker's
// heartbeat, updates and shutdown, GetSplits, DrainWorker, and any added
// later) only the cluster token, so that a client cannot pose as a worker,
// drain splits or announce or order a worker's shutdown. nullopt: not a
// DispatcherService method.
std::optional<RpcRole> DispatcherRpcRole(absl::string_view method);

class GrpcDispatcherImpl final : public RawDispatcherService {
 public:
  // Calls at once, at most: more wait for a thread. DispatcherImpl
  // serialises them on one lock, so more would only wait there.
  static constexpr int kCallThreads = 8;

  // `auth` checks every call's token (service/rpc_auth.h).
  GrpcDispatcherImpl(DispatcherImpl* impl, const RpcAuthenticator* auth)
      : impl_(impl), auth_(auth), calls_(kCallThreads) {}

#define SLUICE_DECLARE_RPC(Method, Request, Response)                                                     \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request, \
                                   grpc::ByteBuffer* response) override;
  SLUICE_DISPATCHER_RPCS(SLUICE_DECLARE_RPC)
#undef SLUICE_DECLARE_RPC

 private:
  DispatcherImpl* const impl_;
  const RpcAuthenticator* const auth_;
  // Declared last: destroyed first, so that calls still queued run while
  // impl_ lives (the server, destroyed before this adapter, has waited for
  // every reactor by then).
  ThreadPool calls_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_GRPC_DISPATCHER_IMPL_H_
