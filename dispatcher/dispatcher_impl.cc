// DispatcherImpl: starts the core and the monitor, and answers GetVersion;
// every other request is its part's (dispatcher_impl.h).
#include "dispatcher/dispatcher_impl.h"

#include <utility>

#include "service/grpc_util.h"

namespace sluice::dispatcher {

DispatcherImpl::DispatcherImpl(DispatcherConfig config, TaskPushFn push_task,
                               JournalFailureFn on_journal_failure)
    : core_(std::move(config), std::move(push_task), std::move(on_journal_failure)) {}

absl::Status DispatcherImpl::Start() {
  if (absl::Status s = core_.Start(); !s.ok()) return s;
  liveness_.StartMonitor();
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetVersion(const proto::GetVersionRequest&, proto::GetVersionResponse* response,
                                        const Caller&) {
  response->set_protocol_version(kProtocolVersion);
  response->set_server_version(kServerVersion);
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
