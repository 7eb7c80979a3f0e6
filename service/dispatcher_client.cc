#include "service/dispatcher_client.h"

#include "absl/strings/str_cat.h"
#include "service/channel_security.h"
#include "service/grpc_util.h"

namespace sluice {
namespace {

// Every request but GetVersion's carries the protocol version.
template <typename Request>
void SetVersion(Request& request) {
  if constexpr (requires { request.mutable_version(); }) *request.mutable_version() = CurrentVersion();
}

}  // namespace

DispatcherClient::DispatcherClient(std::string address)
    : address_(std::move(address)), stub_(proto::DispatcherService::NewStub(MakeChannel(address_))) {}

absl::Status DispatcherClient::Call(const char* method, const DispatcherCall& call,
                                    const std::function<grpc::Status(grpc::ClientContext*)>& attempt) {
  // An unreadable SLUICE_TOKEN_FILE fails the first call, saying so,
  // rather than every call as UNAUTHENTICATED.
  if (const absl::StatusOr<ChannelSecurity> security = DefaultChannelSecurity(); !security.ok()) {
    return security.status();
  }
  if (call.retry_for <= std::chrono::milliseconds(0)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + call.attempt_timeout);
    return FromGrpcStatus(attempt(&context));
  }
  // No attempt outlives the caller's bound: the last one ends with it.
  const auto give_up = std::chrono::system_clock::now() + call.retry_for;
  auto bounded = [&](grpc::ClientContext* context) {
    if (context->deadline() > give_up) context->set_deadline(give_up);
    return attempt(context);
  };
  return CallWithRetries(bounded, call.attempt_timeout, call.retry_for,
                         call.what.empty() ? absl::StrCat(method, " at ", address_) : call.what,
                         call.cancelled, call.still_retrying);
}

#define SLUICE_DEFINE_DISPATCHER_CALL(Method, Request, Response)                                          \
  absl::Status DispatcherClient::Method(proto::Request request, proto::Response* response,                \
                                        const DispatcherCall& call) {                                     \
    SetVersion(request);                                                                                  \
    return Call(#Method, call,                                                                            \
                [&](grpc::ClientContext* context) { return stub_->Method(context, request, response); }); \
  }
SLUICE_DISPATCHER_RPCS(SLUICE_DEFINE_DISPATCHER_CALL)
#undef SLUICE_DEFINE_DISPATCHER_CALL

}  // namespace sluice
