// `sluice drain`: one DrainWorker call to the dispatcher and, with --wait,
// GetWorkers until the worker has left.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "service/dispatcher_client.h"
#include "service/grpc_util.h"

namespace sluice::cli {
namespace {

using Clock = std::chrono::steady_clock;

// How often --wait asks whether the worker is still there.
constexpr auto kWaitPoll = std::chrono::milliseconds(200);

std::chrono::milliseconds Left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// Whether the dispatcher still lists `worker` (draining, in the end).
absl::StatusOr<bool> Listed(DispatcherClient& dispatcher, const std::string& worker,
                            Clock::time_point deadline) {
  proto::GetWorkersResponse workers;
  absl::Status status = dispatcher.GetWorkers({}, &workers, {.attempt_timeout = Left(deadline)});
  if (!status.ok()) return status;
  for (const proto::WorkerInfo& info : workers.workers()) {
    if (info.address() == worker) return true;
  }
  return false;
}

}  // namespace

int DrainWorker(const DrainOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> address = DispatcherAddress(options.service, options.timeout_ms);
  if (!address.ok()) return Fail(address.status(), err, true);
  const auto timeout = std::chrono::milliseconds(options.timeout_ms);
  const Clock::time_point deadline = Clock::now() + timeout;
  DispatcherClient dispatcher(*address);
  proto::DrainWorkerRequest request;
  request.set_worker_address(options.worker);
  proto::DrainWorkerResponse response;
  absl::Status status = dispatcher.DrainWorker(
      request, &response,
      {.attempt_timeout = timeout,
       .retry_for = timeout,
       .what = absl::StrCat("draining worker ", options.worker, " at the dispatcher at ", *address)});
  if (IsUnreachable(status)) {
    return Fail(absl::UnavailableError(absl::StrCat("no dispatcher answered at ", *address, " within ",
                                                    options.timeout_ms, " ms")),
                err, false);
  }
  if (!status.ok()) {
    // Draining a worker is the cluster's business, as a worker's own RPCs.
    const std::string hint = absl::IsUnauthenticated(status)
                                 ? " (sluice drain needs the cluster token: --token-file CLUSTER_TOKEN_FILE)"
                                 : "";
    return Fail(absl::Status(status.code(), absl::StrCat("the dispatcher at ", *address,
                                                         " refused DrainWorker: ", status.message(), hint)),
                err, absl::IsNotFound(status) || absl::IsInvalidArgument(status));
  }
  out << "worker " << options.worker
      << " drains: it gets no new tasks or splits, and leaves once its readers have read what it holds "
         "(or after its drain_timeout_ms)\n";
  out.flush();
  if (!options.wait) return 0;
  while (true) {
    absl::StatusOr<bool> listed = Listed(dispatcher, options.worker, deadline);
    if (listed.ok() && !*listed) {
      out << "worker " << options.worker << " has left\n";
      out.flush();
      return 0;
    }
    if (Clock::now() + kWaitPoll >= deadline) {
      return Fail(
          absl::DeadlineExceededError(absl::StrCat(
              "worker ", options.worker, " had not left within ", options.timeout_ms, " ms (--timeout-ms)",
              listed.ok() ? "" : absl::StrCat("; the dispatcher: ", listed.status().message()))),
          err, false);
    }
    std::this_thread::sleep_for(kWaitPoll);
  }
}

}  // namespace sluice::cli
