#include "dispatcher/request_checks.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "pipeline/definition_limits.h"
#include "service/grpc_util.h"
#include "service/heartbeat_bounds.h"
#include "service/int_ranges.h"
#include "service/worker_positions.h"

namespace sluice::dispatcher {
namespace {

// A value as a message shows it: cut to 100 bytes, control characters
// escaped (a newline in it would forge a line of the log that quotes it).
std::string Shown(const std::string& value) {
  return value.size() <= 100
             ? absl::CHexEscape(value)
             : absl::StrCat(absl::CHexEscape(value.substr(0, 100)), "... (", value.size(), " bytes)");
}

absl::Status Refuse(const std::string& rpc, const std::string& field, const std::string& rule,
                    const std::string& value) {
  return absl::InvalidArgumentError(absl::StrCat(rpc, ": ", field, " must be ", rule, ", got ", value));
}

// An id the dispatcher gave out: positive.
absl::Status CheckId(const std::string& rpc, const std::string& field, int64_t id) {
  if (id > 0) return absl::OkStatus();
  return Refuse(rpc, field, "> 0", absl::StrCat(id));
}

template <typename Ids>
absl::Status CheckIds(const std::string& rpc, const std::string& field, const Ids& ids) {
  for (int64_t id : ids) {
    if (absl::Status s = CheckId(rpc, field, id); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckName(const std::string& rpc, const std::string& field, const std::string& name,
                       bool required) {
  if (required && name.empty())
    return absl::InvalidArgumentError(absl::StrCat(rpc, ": ", field, " is empty"));
  if (name.size() > kMaxNameBytes) {
    return Refuse(rpc, field, absl::StrCat("at most ", kMaxNameBytes, " bytes"),
                  absl::StrCat(name.size(), " bytes"));
  }
  return absl::OkStatus();
}

// A client's report of the positions it took: at most
// kMaxTakenPositionNumbers numbers, each split's well-formed pairs.
absl::Status CheckTakenPositions(const std::string& rpc,
                                 const google::protobuf::RepeatedPtrField<proto::SplitDelivery>& splits) {
  int64_t numbers = 0;
  for (const proto::SplitDelivery& split : splits) numbers += 1 + split.delivered_size();
  if (numbers > kMaxTakenPositionNumbers) {
    return Refuse(rpc, "taken_positions", absl::StrCat("at most ", kMaxTakenPositionNumbers, " numbers"),
                  absl::StrCat(numbers, " numbers"));
  }
  for (const proto::SplitDelivery& split : splits) {
    if (absl::Status s = CheckId(rpc, "taken_positions.seq", split.seq()); !s.ok()) return s;
    if (absl::Status s =
            CheckPairs(split.delivered(), 0, absl::StrCat(rpc, ": taken_positions of split ", split.seq()));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckWorkerAddress(const std::string& what, const std::string& address) {
  absl::StatusOr<std::string> parsed = ParseServiceAddress(address);
  const bool printable =
      std::all_of(address.begin(), address.end(), [](char c) { return c > ' ' && c < 127; });
  if (!parsed.ok() || *parsed != address || address.size() > kMaxNameBytes || !printable) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", Shown(address), "' is not HOST:PORT"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const proto::GetOrRegisterDatasetRequest& request) {
  if (absl::Status s =
          CheckName("GetOrRegisterDataset", "dataset_id", request.dataset_id(), /*required=*/false);
      !s.ok()) {
    return s;
  }
  // A tenant's explicit ids are TENANT/ID: no caller may name one itself.
  if (request.dataset_id().find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetOrRegisterDataset: dataset_id '", request.dataset_id(),
                     "' has a '/', which only a tenant's namespace puts there"));
  }
  // Numbers are the dispatcher's own ids: an explicit one could take the
  // id the next registration would get, or lock every later one out.
  if (!request.dataset_id().empty() && std::all_of(request.dataset_id().begin(), request.dataset_id().end(),
                                                   [](char c) { return c >= '0' && c <= '9'; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GetOrRegisterDataset: dataset_id '", request.dataset_id(),
        "' is a number, and numbers are the dispatcher's own ids: name an explicit id with a letter in it, "
        "or leave it empty to have one given"));
  }
  if (absl::Status s = CheckDefinitionLimits(request.dataset()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("GetOrRegisterDataset: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const proto::GetDatasetInfoRequest& request) {
  return CheckName("GetDatasetInfo", "dataset_id", request.dataset_id(), /*required=*/true);
}

absl::Status CheckRequest(const proto::GetOrCreateJobRequest& request) {
  const proto::JobParams& params = request.params();
  if (absl::Status s = CheckName("job", "dataset_id", params.dataset_id(), /*required=*/true); !s.ok())
    return s;
  if (absl::Status s = CheckName("job", "job_name", params.job_name(), /*required=*/false); !s.ok()) return s;
  if (params.processing_mode() == proto::PROCESSING_MODE_UNSET) {
    return absl::InvalidArgumentError("job: processing_mode is not set");
  }
  if (!proto::ProcessingMode_IsValid(params.processing_mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job: processing_mode ", params.processing_mode(),
                     " is not a processing mode (1: parallel_epochs, 2: distributed_epoch)"));
  }
  if (!proto::ShardingPolicy_IsValid(params.sharding_policy())) {
    return absl::InvalidArgumentError(absl::StrCat("job: sharding_policy ", params.sharding_policy(),
                                                   " is not a sharding policy (0 to 6)"));
  }
  if (params.num_consumers() < 0 || params.num_consumers() > kMaxConsumers) {
    return Refuse("job", "num_consumers", absl::StrCat("in [0, ", kMaxConsumers, "]"),
                  absl::StrCat(params.num_consumers()));
  }
  if (!params.static_workers().empty()) {
    return absl::InvalidArgumentError("job: static_workers is the dispatcher's to fill in, not the client's");
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const proto::GetOrCreateIterationRequest& request) {
  const std::string rpc = "GetOrCreateIteration";
  if (absl::Status s = CheckId(rpc, "job_id", request.job_id()); !s.ok()) return s;
  if (request.repetition() < 0 || request.repetition() > kMaxRepetition) {
    return Refuse(rpc, "repetition", absl::StrCat("in [0, 2^40 = ", kMaxRepetition, "]"),
                  absl::StrCat(request.repetition()));
  }
  if (request.consumer_index() < 0 || request.consumer_index() >= kMaxConsumers) {
    return Refuse(rpc, "consumer_index", absl::StrCat("in [0, ", kMaxConsumers, ")"),
                  absl::StrCat(request.consumer_index()));
  }
  if (request.epoch_key().size() > kMaxEpochKeyBytes) {
    return Refuse(rpc, "epoch_key", absl::StrCat("at most ", kMaxEpochKeyBytes, " bytes"),
                  absl::StrCat(request.epoch_key().size(), " bytes"));
  }
  if (request.skip_splits_size() > kMaxSkipSplitNumbers) {
    return Refuse(rpc, "skip_splits", absl::StrCat("at most ", kMaxSkipSplitNumbers, " numbers"),
                  absl::StrCat(request.skip_splits_size(), " numbers"));
  }
  if (absl::StatusOr<IntRanges> skip = RangesFromPairs(request.skip_splits(), 1, rpc + ": skip_splits");
      !skip.ok()) {
    return skip.status();
  }
  int64_t position_numbers = 0;
  for (const proto::WorkerPositions& worker : request.skip_positions()) {
    position_numbers += worker.positions_size();
  }
  if (request.skip_positions_size() > kMaxSkipWorkers || position_numbers > kMaxSkipSplitNumbers) {
    return Refuse(
        rpc, "skip_positions",
        absl::StrCat("at most ", kMaxSkipWorkers, " workers and ", kMaxSkipSplitNumbers, " numbers"),
        absl::StrCat(request.skip_positions_size(), " workers and ", position_numbers, " numbers"));
  }
  for (const proto::WorkerPositions& worker : request.skip_positions()) {
    if (absl::Status s = CheckWorkerAddress(rpc + ": skip_positions.worker_address", worker.worker_address());
        !s.ok()) {
      return s;
    }
  }
  if (absl::StatusOr<WorkerRanges> positions =
          WorkerRangesFromProto(request.skip_positions(), rpc + ": skip_positions");
      !positions.ok()) {
    return positions.status();
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const proto::ClientHeartbeatRequest& request) {
  const std::string rpc = "ClientHeartbeat";
  if (absl::Status s = CheckId(rpc, "iteration_client_id", request.iteration_client_id()); !s.ok()) return s;
  const auto bounded = [&](const std::string& field, int size, int most) {
    return size <= most ? absl::OkStatus()
                        : Refuse(rpc, field, absl::StrCat("at most ", most, " entries"), absl::StrCat(size));
  };
  if (absl::Status s = bounded("completed_tasks", request.completed_tasks_size(), kMaxCompletedPerHeartbeat);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          bounded("completed_splits", request.completed_splits_size(), kMaxCompletedPerHeartbeat);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          bounded("unreachable_workers", request.unreachable_workers_size(), kMaxUnreachablePerHeartbeat);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckIds(rpc, "completed_tasks", request.completed_tasks()); !s.ok()) return s;
  if (absl::Status s = CheckIds(rpc, "completed_splits", request.completed_splits()); !s.ok()) return s;
  if (request.current_round() < 0) {
    return Refuse(rpc, "current_round", ">= 0", absl::StrCat(request.current_round()));
  }
  for (const std::string& address : request.unreachable_workers()) {
    if (absl::Status s = CheckWorkerAddress(rpc + ": unreachable_workers", address); !s.ok()) return s;
  }
  if (request.answered_hold() < 0) {
    return Refuse(rpc, "answered_hold", ">= 0", absl::StrCat(request.answered_hold()));
  }
  return CheckTakenPositions(rpc, request.taken_positions());
}

absl::Status CheckRequest(const proto::ReleaseIterationClientRequest& request) {
  const std::string rpc = "ReleaseIterationClient";
  if (absl::Status s = CheckId(rpc, "iteration_client_id", request.iteration_client_id()); !s.ok()) return s;
  return CheckTakenPositions(rpc, request.taken_positions());
}

absl::Status CheckRequest(const proto::WorkerHeartbeatRequest& request) {
  const std::string rpc = "WorkerHeartbeat";
  if (request.worker_address().empty())
    return absl::InvalidArgumentError("worker heartbeat without an address");
  if (absl::Status s = CheckWorkerAddress("worker heartbeat: worker_address", request.worker_address());
      !s.ok()) {
    return s;
  }
  if (request.tags_size() > kMaxWorkerTags) {
    return Refuse(rpc, "tags", absl::StrCat("at most ", kMaxWorkerTags), absl::StrCat(request.tags_size()));
  }
  for (const std::string& tag : request.tags()) {
    if (absl::Status s = CheckName(rpc, "tags", tag, /*required=*/true); !s.ok()) return s;
  }
  if (absl::Status s = CheckName(rpc, "incarnation", request.incarnation(), false); !s.ok()) return s;
  for (const proto::TaskLoad& load : request.task_loads()) {
    if (absl::Status s = CheckId(rpc, "task_loads.task_id", load.task_id()); !s.ok()) return s;
  }
  return CheckIds(rpc, "current_tasks", request.current_tasks());
}

absl::Status CheckRequest(const proto::WorkerUpdatesRequest& request) {
  const std::string rpc = "WorkerUpdates";
  if (absl::Status s = CheckWorkerAddress(rpc + ": worker_address", request.worker_address()); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckIds(rpc, "finished_tasks", request.finished_tasks()); !s.ok()) return s;
  for (const proto::TaskFailure& failure : request.failed_tasks()) {
    if (absl::Status s = CheckId(rpc, "failed_tasks.task_id", failure.task_id()); !s.ok()) return s;
    if (failure.code() <= 0 || failure.code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      return Refuse(rpc, "failed_tasks.code", "an error code in [1, 16]", absl::StrCat(failure.code()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const proto::WorkerShutdownRequest& request) {
  return CheckWorkerAddress("WorkerShutdown: worker_address", request.worker_address());
}

absl::Status CheckRequest(const proto::DrainWorkerRequest& request) {
  return CheckWorkerAddress("DrainWorker: worker_address", request.worker_address());
}

absl::Status CheckRequest(const proto::GetSplitsRequest& request) {
  const std::string rpc = "GetSplits";
  if (absl::Status s = CheckId(rpc, "iteration_id", request.iteration_id()); !s.ok()) return s;
  if (absl::Status s = CheckId(rpc, "task_id", request.task_id()); !s.ok()) return s;
  if (request.request_id() < 0) return Refuse(rpc, "request_id", ">= 0", absl::StrCat(request.request_id()));
  if (request.max_splits() < 0 || request.max_splits() > kMaxSplitsPerRequest) {
    return Refuse(rpc, "max_splits", absl::StrCat("in [0, ", kMaxSplitsPerRequest, "]"),
                  absl::StrCat(request.max_splits()));
  }
  return absl::OkStatus();
}

}  // namespace sluice::dispatcher
