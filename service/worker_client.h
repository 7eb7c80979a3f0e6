// WorkerClient: every call to a worker goes through here, from the
// reader's transports (client/read/) and the dispatcher's task pusher, as
// every call to the dispatcher goes through DispatcherClient. It sets the
// protocol version and each call's deadline; the channel carries the
// process's token and TLS settings (MakeChannel). No call is retried here:
// a reader retries GetElements by its own rules, and a failed task push is
// carried by the worker's next heartbeat.
//
//   WorkerClient worker("127.0.0.1:6000", /*connections=*/2);
//   grpc::ByteBuffer bytes;
//   absl::Status status = worker.GetElements(request, &bytes);
#ifndef SLUICE_SERVICE_WORKER_CLIENT_H_
#define SLUICE_SERVICE_WORKER_CLIENT_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "service/grpc_util.h"
#include "sluice/proto/service.grpc.pb.h"

namespace sluice {

// The deadlines of the calls to a worker. GetElements waits for elements a
// worker may still be making; the others answer from the worker's state.
inline constexpr std::chrono::seconds kGetElementsTimeout{30};
inline constexpr std::chrono::seconds kOpenSharedMemoryTimeout{5};
inline constexpr std::chrono::seconds kProcessTaskTimeout{2};

class WorkerClient {
 public:
  // `connections` channels to `address`, which GetElements takes in turn.
  // With one, the channel may share gRPC's connection with the process's
  // other channels to the worker; with more, each has a connection of its
  // own.
  // `options.own_connection` is set when connections > 1.
  explicit WorkerClient(std::string address, int connections = 1, ChannelOptions options = {});
  // Cancels the ProcessTask calls in flight and returns once their
  // callbacks have run and freed their ClientContext, so that the channel's
  // last reference drops here. Dropped on gRPC's callback thread (a call's
  // context outliving the client), ~Channel shuts down and deletes the
  // callback queue that very thread polls (gRPC 1.51), which then aborts in
  // grpc_cq_internal_unref ("prior > 0"; core dump of 2026-11-29): 3 of 180
  // test runs under load, none of 360 since.
  ~WorkerClient();
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  const std::string& address() const { return address_; }

  // GetElements with `request` stamped with the protocol version, and the response left as gRPC's bytes,
  // which service/element_wire.h decodes without proto objects. Blocks.
  absl::Status GetElements(proto::GetElementsRequest request, grpc::ByteBuffer* response);

  // OpenSharedMemory, versioned. Blocks.
  absl::Status OpenSharedMemory(const proto::OpenSharedMemoryRequest& request,
                                proto::OpenSharedMemoryResponse* response);

  // Starts ProcessTask for `task` and returns at once, never blocking on the
  // network; `done` runs on a gRPC thread with the outcome (Cancelled when
  // the client is destroyed first). `done` must not destroy the client, nor
  // wait for a thread that does: the destructor waits for `done`.
  void ProcessTask(const proto::TaskDef& task, std::function<void(absl::Status)> done);

 private:
  struct ProcessTaskCall;

  const std::string address_;
  std::vector<std::unique_ptr<grpc::GenericStub>> raw_stubs_;
  std::atomic<size_t> next_raw_stub_{0};
  // On the first channel: the calls whose answers are small protos.
  std::unique_ptr<proto::WorkerService::Stub> stub_;
  absl::Mutex calls_mu_;
  // ProcessTask calls whose callbacks have not finished, by a number of
  // their own (a freed call's address may be the next call's); an entry's
  // pointer is null once its callback has let the call's state go.
  uint64_t next_call_ ABSL_GUARDED_BY(calls_mu_) = 0;
  std::map<uint64_t, std::shared_ptr<ProcessTaskCall>> calls_ ABSL_GUARDED_BY(calls_mu_);
};

}  // namespace sluice

#endif  // SLUICE_SERVICE_WORKER_CLIENT_H_
