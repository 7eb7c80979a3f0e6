#include "client/job_checkpoint.h"

#include "absl/strings/str_cat.h"
#include "client/split_deliveries.h"
#include "pipeline/builder.h"
#include "pipeline/iterator_state.h"
#include "sluice/checkpoint.pb.h"
#include "sluice/iterator.h"

namespace sluice {
namespace internal {
namespace {

// The `distribute` iterator keeps its deliveries under this key
// (data_service_dataset.cc).
constexpr char kServiceReadKey[] = "service_read";

void FindServiceReads(const proto::IteratorState& state, std::vector<const std::string*>* found) {
  if (auto blob = state.blobs().find(kServiceReadKey); blob != state.blobs().end())
    found->push_back(&blob->second);
  for (const proto::IteratorState& input : state.inputs()) FindServiceReads(input, found);
}

int64_t HeldElements(const proto::IteratorState& state) {
  int64_t held = state.elements_size();
  for (const proto::IteratorState& input : state.inputs()) held += HeldElements(input);
  return held;
}

absl::StatusOr<SplitDeliveries> ParseDeliveries(const std::string& bytes, const std::string& name) {
  proto::ServiceReadState state;
  if (!state.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the service read state does not parse"));
  }
  absl::StatusOr<SplitDeliveries> deliveries = SplitDeliveries::FromProto(state);
  if (!deliveries.ok())
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", deliveries.status().message()));
  return deliveries;
}

}  // namespace

std::string CheckpointFingerprint(const proto::DatasetDef& def) {
  proto::DatasetDef data = def;
  for (proto::Step& step : *data.mutable_steps()) {
    if (!step.has_distribute()) continue;
    proto::DistributeOp& op = *step.mutable_distribute();
    // Kept: what decides the elements (the mode, sharding, exactly_once).
    op.clear_service();
    op.clear_job_name();
    op.clear_max_outstanding_requests();
    op.clear_compression();
    op.clear_timeout_ms();
    op.clear_num_consumers();
    op.clear_consumer_index();
    op.clear_allow_partial();
    op.clear_connections_per_worker();
    op.clear_transport();
  }
  return DatasetFingerprint(data);
}

absl::StatusOr<std::string> MergeNamedStates(const std::vector<std::pair<std::string, std::string>>& states) {
  if (states.empty()) return absl::InvalidArgumentError("checkpoint merge: no saved states to merge");
  proto::PipelineCheckpoint merged;
  SplitDeliveries delivered;
  for (const auto& [name, bytes] : states) {
    proto::PipelineCheckpoint state;
    if (!state.ParseFromString(bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": does not parse as a saved iterator state (not Iterator::Save's bytes?)"));
    }
    if (state.version() != kPipelineCheckpointVersion) {
      return absl::FailedPreconditionError(absl::StrCat(name, ": has version ", state.version(),
                                                        "; this build reads version ",
                                                        kPipelineCheckpointVersion));
    }
    if (merged.fingerprint().empty()) {
      merged.set_version(state.version());
      merged.set_fingerprint(state.fingerprint());
    } else if (state.fingerprint() != merged.fingerprint()) {
      return absl::FailedPreconditionError(absl::StrCat(name, ": is from another pipeline (fingerprint ",
                                                        state.fingerprint(), "; ", states.front().first,
                                                        " has ", merged.fingerprint(), ")"));
    }
    std::vector<const std::string*> reads;
    if (state.has_job()) {
      absl::StatusOr<SplitDeliveries> job = SplitDeliveries::FromProto(state.job());
      if (!job.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", job.status().message()));
      delivered.Merge(*job);
      for (const proto::IteratorState& root : state.consumer_roots()) *merged.add_consumer_roots() = root;
      continue;
    }
    FindServiceReads(state.root(), &reads);
    if (reads.size() != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, reads.empty() ? ": reads no service job (a local pipeline's state): nothing to merge"
                              : ": reads more than one service job, which a merge cannot tell apart"));
    }
    absl::StatusOr<SplitDeliveries> consumer = ParseDeliveries(*reads.front(), name);
    if (!consumer.ok()) return consumer.status();
    if (!delivered.split_layout().empty() && !consumer->split_layout().empty() &&
        consumer->split_layout() != delivered.split_layout()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, ": was read under split layout '", consumer->split_layout(),
                       "', the states before under '", delivered.split_layout(), "'"));
    }
    delivered.Merge(*consumer);
    *merged.add_consumer_roots() = state.root();
  }
  *merged.mutable_job() = delivered.ToProto();
  return merged.SerializeAsString();
}

absl::StatusOr<RestoredIterator> RestoreParts(const DatasetBase& dataset, const std::string& fingerprint,
                                              const std::string& bytes, const RestoreOptions& options,
                                              bool distributed) {
  if (options.num_consumers < 1 || options.consumer_index < 0 ||
      options.consumer_index >= options.num_consumers) {
    return absl::InvalidArgumentError(absl::StrCat("restore: consumer index ", options.consumer_index,
                                                   " is outside [0, ", options.num_consumers, ")"));
  }
  absl::StatusOr<proto::PipelineCheckpoint> checkpoint = ParsePipelineCheckpoint(bytes, fingerprint);
  if (!checkpoint.ok()) return checkpoint.status();
  // A DistributedIterator's state wraps the pipeline's: the elements of
  // the steps it had not yet handed out, then the pipeline's own state.
  auto unwrap = [distributed](const proto::IteratorState& root,
                              std::vector<Element>* replay) -> absl::StatusOr<const proto::IteratorState*> {
    if (!root.ints().contains(kReplayKey)) return &root;
    if (!distributed) {
      return absl::FailedPreconditionError(
          "restore: the state was saved by a DistributedIterator; restore it with "
          "DistributedDataset::MakeIterator(restore_from)");
    }
    if (root.inputs_size() != 1) return MalformedState("a DistributedIterator state without its pipeline's");
    absl::StatusOr<std::vector<Element>> elements = RestoreElements(root);
    if (!elements.ok()) return elements.status();
    if (replay != nullptr) replay->insert(replay->end(), elements->begin(), elements->end());
    return &root.inputs(0);
  };
  RestoredIterator restored;
  IteratorContext context;
  context.restoring = true;
  const proto::IteratorState* local = nullptr;
  if (!checkpoint->has_job()) {
    if (options.num_consumers != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: one consumer's saved state restores one consumer, not ", options.num_consumers,
          "; merge the states that all consumers saved at one step into a job checkpoint first (sluice "
          "checkpoint merge)"));
    }
    absl::StatusOr<const proto::IteratorState*> inner = unwrap(checkpoint->root(), &restored.replay);
    if (!inner.ok()) return inner.status();
    local = *inner;
  } else {
    const int64_t saved_consumers = checkpoint->consumer_roots_size();
    if (saved_consumers == options.num_consumers) {
      absl::StatusOr<const proto::IteratorState*> inner =
          unwrap(checkpoint->consumer_roots(static_cast<int>(options.consumer_index)), &restored.replay);
      if (!inner.ok()) return inner.status();
      local = *inner;
    } else {
      // On another number of consumers, each starts its local steps
      // afresh: elements they held were delivered by the service, so only
      // those a DistributedIterator had not handed out (whole input
      // elements) can go to another consumer, in turn.
      for (int64_t k = 0; k < saved_consumers; ++k) {
        absl::StatusOr<const proto::IteratorState*> inner =
            unwrap(checkpoint->consumer_roots(static_cast<int>(k)),
                   k % options.num_consumers == options.consumer_index ? &restored.replay : nullptr);
        if (!inner.ok()) return inner.status();
        if (int64_t held = HeldElements(**inner); held > 0) {
          return absl::FailedPreconditionError(absl::StrCat(
              "restore: merged state ", k, " holds ", held,
              " elements in the steps after distribute (a partial batch, a prefetch or shuffle buffer), "
              "which "
              "only its own consumer can give: restore this job checkpoint on ",
              saved_consumers, " consumers, as it was saved, or save where those steps hold nothing"));
        }
      }
    }
    context.service_resume = std::make_shared<ServiceResume>();
    context.service_resume->state = checkpoint->job().SerializeAsString();
    context.service_resume->consumer_index = options.consumer_index;
    context.service_resume->num_consumers = options.num_consumers;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = dataset.MakeIterator(context);
  if (!iterator.ok()) return iterator.status();
  if (context.service_resume != nullptr && !context.service_resume->taken.load()) {
    return absl::FailedPreconditionError(
        "restore: a job checkpoint restores a pipeline that reads from the service, and this one has no "
        "distribute step");
  }
  if (local != nullptr) {
    if (absl::Status s = (*iterator)->Restore(*local); !s.ok()) return s;
  }
  restored.iterator = *std::move(iterator);
  return restored;
}

absl::StatusOr<std::unique_ptr<IteratorBase>> RestoreIterator(const DatasetBase& dataset,
                                                              const std::string& fingerprint,
                                                              const std::string& bytes,
                                                              const RestoreOptions& options) {
  absl::StatusOr<RestoredIterator> restored = RestoreParts(dataset, fingerprint, bytes, options, false);
  if (!restored.ok()) return restored.status();
  return std::move(restored->iterator);
}

}  // namespace internal

absl::StatusOr<std::string> MergeSavedStates(const std::vector<std::string>& consumer_states) {
  std::vector<std::pair<std::string, std::string>> named;
  for (size_t i = 0; i < consumer_states.size(); ++i)
    named.emplace_back(absl::StrCat("state ", i), consumer_states[i]);
  return internal::MergeNamedStates(named);
}

}  // namespace sluice
