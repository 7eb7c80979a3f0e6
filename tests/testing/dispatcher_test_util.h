// Helpers shared by the tests of DispatcherImpl (dispatcher_impl_test.cc,
// dispatcher_splits_test.cc, liveness_test.cc,
// dispatcher_recovery_test.cc): a small config, a dataset, and one wrapper
// per RPC that fills `version` and REQUIREs success.
#ifndef SLUICE_TESTS_TESTING_DISPATCHER_TEST_UTIL_H_
#define SLUICE_TESTS_TESTING_DISPATCHER_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/dataset_internal.h"
#include "dispatcher/dispatcher_impl.h"
#include "pipeline/split_provider.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"

namespace sluice::dispatcher {

inline DispatcherConfig TestConfig() {
  DispatcherConfig config;
  config.splits_per_request = 4;
  config.elements_per_split = 10;
  return config;
}

inline proto::DatasetDef SquaresDef() { return internal::DefinitionOf(Dataset::Range(10).Map("square")); }

// Calls `rpc` with `request`, its version filled in.
template <typename Request, typename Response>
absl::Status Call(DispatcherImpl& d,
                  absl::Status (DispatcherImpl::*rpc)(const Request&, Response*, const Caller&),
                  Request request, Response* response, const Caller& caller = {}) {
  *request.mutable_version() = CurrentVersion();
  return (d.*rpc)(request, response, caller);
}

// The same, REQUIRE-ing success; the response.
template <typename Request, typename Response>
Response CallOk(DispatcherImpl& d,
                absl::Status (DispatcherImpl::*rpc)(const Request&, Response*, const Caller&),
                const Request& request, const Caller& caller = {}) {
  Response response;
  absl::Status status = Call(d, rpc, request, &response, caller);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return response;
}

// Small wrappers, one per RPC; those not named Try REQUIRE success.
inline proto::GetOrRegisterDatasetRequest Registration(const proto::DatasetDef& def, const std::string& id) {
  proto::GetOrRegisterDatasetRequest request;
  *request.mutable_dataset() = def;
  request.set_dataset_id(id);
  return request;
}

inline std::string Register(DispatcherImpl& d, const proto::DatasetDef& def, const std::string& id = "") {
  return CallOk(d, &DispatcherImpl::GetOrRegisterDataset, Registration(def, id)).dataset_id();
}

inline absl::Status TryRegister(DispatcherImpl& d, const proto::DatasetDef& def, const std::string& id = "") {
  proto::GetOrRegisterDatasetResponse response;
  return Call(d, &DispatcherImpl::GetOrRegisterDataset, Registration(def, id), &response);
}

inline absl::Status TryJob(DispatcherImpl& d, const proto::JobParams& params, int64_t* job_id = nullptr) {
  proto::GetOrCreateJobRequest request;
  *request.mutable_params() = params;
  proto::GetOrCreateJobResponse response;
  absl::Status status = Call(d, &DispatcherImpl::GetOrCreateJob, request, &response);
  if (job_id != nullptr) *job_id = response.job_id();
  return status;
}

inline absl::Status TryJob(DispatcherImpl& d, const std::string& dataset_id, proto::ProcessingMode mode,
                           const std::string& name, int64_t* job_id = nullptr) {
  proto::JobParams params;
  params.set_dataset_id(dataset_id);
  params.set_processing_mode(mode);
  params.set_job_name(name);
  return TryJob(d, params, job_id);
}

inline int64_t Job(DispatcherImpl& d, const std::string& dataset_id,
                   proto::ProcessingMode mode = proto::PARALLEL_EPOCHS, const std::string& name = "") {
  int64_t job_id = 0;
  absl::Status status = TryJob(d, dataset_id, mode, name, &job_id);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return job_id;
}

inline proto::GetOrCreateIterationResponse Iteration(DispatcherImpl& d, int64_t job_id,
                                                     int64_t repetition = 0) {
  proto::GetOrCreateIterationRequest request;
  request.set_job_id(job_id);
  request.set_repetition(repetition);
  return CallOk(d, &DispatcherImpl::GetOrCreateIteration, request);
}

inline proto::WorkerHeartbeatResponse Heartbeat(DispatcherImpl& d, const std::string& address,
                                                const std::vector<int64_t>& current = {},
                                                const std::vector<std::string>& tags = {}) {
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address);
  request.mutable_current_tasks()->Add(current.begin(), current.end());
  request.mutable_tags()->Add(tags.begin(), tags.end());
  return CallOk(d, &DispatcherImpl::WorkerHeartbeat, request);
}

inline proto::ClientHeartbeatResponse ClientReport(DispatcherImpl& d, int64_t client_id,
                                                   const std::vector<int64_t>& completed_tasks,
                                                   const std::vector<std::string>& unreachable = {}) {
  proto::ClientHeartbeatRequest request;
  request.set_iteration_client_id(client_id);
  request.set_client_secret(d.ClientSecretOf(client_id));
  request.mutable_completed_tasks()->Add(completed_tasks.begin(), completed_tasks.end());
  request.mutable_unreachable_workers()->Add(unreachable.begin(), unreachable.end());
  return CallOk(d, &DispatcherImpl::ClientHeartbeat, request);
}

inline proto::ClientHeartbeatResponse ClientBeat(DispatcherImpl& d, int64_t client_id) {
  return ClientReport(d, client_id, {});
}

inline void Finish(DispatcherImpl& d, const std::string& address, const std::vector<int64_t>& tasks) {
  proto::WorkerUpdatesRequest request;
  request.set_worker_address(address);
  request.mutable_finished_tasks()->Add(tasks.begin(), tasks.end());
  CallOk(d, &DispatcherImpl::WorkerUpdates, request);
}

inline void Shutdown(DispatcherImpl& d, const std::string& address) {
  proto::WorkerShutdownRequest request;
  request.set_worker_address(address);
  CallOk(d, &DispatcherImpl::WorkerShutdown, request);
}

// GetSplits's answer as sent: consecutive splits joined into runs.
inline proto::GetSplitsResponse RawSplits(DispatcherImpl& d, int64_t iteration_id, int64_t task_id,
                                          int max_splits, int64_t request_id = 0) {
  proto::GetSplitsRequest request;
  request.set_iteration_id(iteration_id);
  request.set_task_id(task_id);
  request.set_max_splits(max_splits);
  request.set_request_id(request_id);
  return CallOk(d, &DispatcherImpl::GetSplits, request);
}

// The same answer with every run expanded into its single splits.
inline proto::GetSplitsResponse Splits(DispatcherImpl& d, int64_t iteration_id, int64_t task_id,
                                       int max_splits, int64_t request_id = 0) {
  const proto::GetSplitsResponse runs = RawSplits(d, iteration_id, task_id, max_splits, request_id);
  proto::GetSplitsResponse splits;
  splits.set_end_of_splits(runs.end_of_splits());
  *splits.mutable_skip_positions() = runs.skip_positions();
  for (const proto::SplitProto& message : runs.splits()) {
    const Split run = SplitFromMessage(message);
    for (int64_t i = 0; i < run.count; ++i) SplitToMessage(SplitRunPart(run, i, 1), splits.add_splits());
  }
  return splits;
}

inline proto::StatusSnapshot Snapshot(DispatcherImpl& d) {
  return CallOk(d, &DispatcherImpl::GetStatus, proto::GetStatusRequest());
}

// Applies `update` to `state`, which must take it.
inline void ApplyOk(DispatcherState& state, const proto::Update& update) {
  absl::Status status = state.Apply(update);
  INFO(status.ToString());
  REQUIRE(status.ok());
}

// A state with dataset "d" (range(100)), job 1 of `params` over it, and
// the job's iteration 1 (repetition 0).
inline DispatcherState StateWithIteration(proto::JobParams params) {
  DispatcherState state;
  proto::Update update;
  update.mutable_register_dataset()->set_dataset_id("d");
  *update.mutable_register_dataset()->mutable_dataset() = internal::DefinitionOf(Dataset::Range(100));
  ApplyOk(state, update);
  params.set_dataset_id("d");
  update.Clear();
  update.mutable_create_job()->set_job_id(1);
  *update.mutable_create_job()->mutable_params() = std::move(params);
  ApplyOk(state, update);
  update.Clear();
  update.mutable_create_iteration()->set_iteration_id(1);
  update.mutable_create_iteration()->set_job_id(1);
  ApplyOk(state, update);
  return state;
}

// A distributed_epoch job over range(1000) (100 splits with TestConfig),
// named `name` ("": anonymous).
inline int64_t RangeJobOverSplits(DispatcherImpl& d, bool exactly_once, const std::string& name = "") {
  proto::JobParams params;
  params.set_dataset_id(Register(d, internal::DefinitionOf(Dataset::Range(1000))));
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  params.set_exactly_once(exactly_once);
  params.set_job_name(name);
  int64_t job_id = 0;
  absl::Status status = TryJob(d, params, &job_id);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return job_id;
}

// The task of `iteration_id` on `address`.
inline int64_t TaskOn(DispatcherImpl& d, int64_t iteration_id, const std::string& address) {
  const proto::StatusSnapshot snapshot = Snapshot(d);
  for (const auto& task : snapshot.tasks()) {
    if (task.iteration_id() == iteration_id && task.worker_address() == address) return task.task_id();
  }
  FAIL("no task of iteration " << iteration_id << " on " << address);
  return 0;
}

inline std::vector<std::string> WorkerAddresses(DispatcherImpl& d) {
  const proto::GetWorkersResponse response =
      CallOk(d, &DispatcherImpl::GetWorkers, proto::GetWorkersRequest());
  std::vector<std::string> addresses;
  for (const auto& w : response.workers()) addresses.push_back(w.address());
  return addresses;
}

// (task id, worker address) pairs of a client heartbeat, in order.
inline std::vector<std::pair<int64_t, std::string>> Listed(const proto::ClientHeartbeatResponse& response) {
  std::vector<std::pair<int64_t, std::string>> tasks;
  for (const auto& t : response.tasks()) tasks.emplace_back(t.task_id(), t.worker_address());
  return tasks;
}

inline std::vector<int64_t> NewTaskIds(const proto::WorkerHeartbeatResponse& response) {
  std::vector<int64_t> ids;
  for (const auto& t : response.new_tasks()) ids.push_back(t.task_id());
  return ids;
}

using Listing = std::vector<std::pair<int64_t, std::string>>;

// The begin of each split of a GetSplits answer, and its seq.
inline std::vector<std::pair<int64_t, int64_t>> Begins(const proto::GetSplitsResponse& response) {
  std::vector<std::pair<int64_t, int64_t>> begins;
  for (const auto& split : response.splits()) begins.emplace_back(split.begin(), split.seq());
  return begins;
}
using BeginsAndSeqs = std::vector<std::pair<int64_t, int64_t>>;

// For waits on the monitor (Start) while a worker must stay registered:
// heartbeats `worker` (running `tasks`), and each of `clients`, every
// 20 ms for `how_long`; the clients' responses must be clean (no error).
inline void KeepHeard(DispatcherImpl& d, const std::string& worker, const std::vector<int64_t>& tasks,
                      const std::vector<int64_t>& clients, std::chrono::milliseconds how_long) {
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until) {
    Heartbeat(d, worker, tasks);
    for (int64_t client : clients) {
      const proto::ClientHeartbeatResponse response = ClientBeat(d, client);
      INFO("client " << client << ": " << response.error_message());
      REQUIRE(response.error_code() == 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Heartbeats `client` (and `worker`, running `tasks`) every 20 ms until a
// response carries an error, for at most 20 s; every response before it
// must have held the end back (neither finished nor failed). That response.
inline proto::ClientHeartbeatResponse BeatWhileHeld(DispatcherImpl& d, int64_t client,
                                                    const std::string& worker,
                                                    const std::vector<int64_t>& tasks) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < give_up) {
    Heartbeat(d, worker, tasks);
    const proto::ClientHeartbeatResponse response = ClientBeat(d, client);
    if (response.error_code() != 0) return response;
    REQUIRE_FALSE(response.iteration_finished());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL("client " << client << "'s heartbeats carried no error within 20 s");
  return {};
}

}  // namespace sluice::dispatcher

#endif  // SLUICE_TESTS_TESTING_DISPATCHER_TEST_UTIL_H_
