#include "client/job_checkpoint.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/read/split_deliveries.h"
#include "client/replay_iterator.h"
#include "pipeline/builder.h"
#include "pipeline/iterator_state.h"
#include "sluice/checkpoint.pb.h"
#include "sluice/iterator.h"

namespace sluice {
namespace internal {
namespace {

using reader::SplitDeliveries;

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
    // Which epoch of which trainer's peers: a restore makes a job of its own.
    op.clear_peer_epoch_key();
    op.clear_peer_job_private();
  }
  return DatasetFingerprint(data);
}

absl::StatusOr<std::string> MergeNamedStates(const std::vector<std::pair<std::string, std::string>>& states) {
  if (states.empty())
    return absl::InvalidArgumentError(
        "merge_saved_states (sluice checkpoint merge): no saved states to merge");
  proto::PipelineCheckpoint merged;
  SplitDeliveries delivered;
  int64_t repetition = 0;
  std::string job_name;
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
    proto::ServiceReadState read;
    if (state.has_job()) {
      read = state.job();
      for (const proto::IteratorState& root : state.consumer_roots()) *merged.add_consumer_roots() = root;
    } else {
      std::vector<const std::string*> reads;
      FindServiceReads(state.root(), &reads);
      if (reads.size() != 1) {
        return absl::FailedPreconditionError(absl::StrCat(
            name, reads.empty()
                      ? ": holds no service read (a local pipeline's state, or one saved between two "
                        "epochs of a repeat after distribute): nothing to merge"
                      : ": reads more than one service job, which a merge cannot tell apart"));
      }
      if (!read.ParseFromString(*reads.front())) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": the service read state does not parse"));
      }
      *merged.add_consumer_roots() = state.root();
    }
    absl::StatusOr<SplitDeliveries> consumer = SplitDeliveries::FromProto(read);
    if (!consumer.ok())
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", consumer.status().message()));
    if (!delivered.split_layout().empty() && !consumer->split_layout().empty() &&
        consumer->split_layout() != delivered.split_layout()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, ": was read under split layout '", consumer->split_layout(),
                       "', the states before under '", delivered.split_layout(), "'"));
    }
    // Consumers of one repetition of one job: deliveries of another would
    // name other reads' elements (two iterators of one dataset read two
    // repetitions).
    if (&bytes != &states.front().second && !read.job_name().empty() &&
        (read.job_name() != job_name || read.repetition() != repetition)) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, ": read job '", read.job_name(), "' repetition ", read.repetition(), ", and ",
                       states.front().first, " job '", job_name, "' repetition ", repetition,
                       ": a job checkpoint merges the consumers of one repetition of one job"));
    }
    delivered.Merge(*consumer);
    if (&bytes == &states.front().second) {
      repetition = read.repetition();
      job_name = read.job_name();
    }
  }
  *merged.mutable_job() = delivered.ToProto();
  merged.mutable_job()->set_repetition(repetition);
  merged.mutable_job()->set_job_name(job_name);
  return merged.SerializeAsString();
}

absl::StatusOr<RestoredIterator> RestoreParts(const DatasetBase& dataset, const std::string& fingerprint,
                                              const std::string& bytes, const RestoreOptions& options) {
  if (options.num_consumers < 1 || options.consumer_index < 0 ||
      options.consumer_index >= options.num_consumers) {
    return absl::InvalidArgumentError(absl::StrCat("restore: consumer index ", options.consumer_index,
                                                   " is outside [0, ", options.num_consumers, ")"));
  }
  absl::StatusOr<proto::PipelineCheckpoint> checkpoint = ParsePipelineCheckpoint(bytes, fingerprint);
  if (!checkpoint.ok()) return checkpoint.status();
  // A state saved with elements read ahead (client/replay_iterator.h)
  // wraps the pipeline's.
  auto unwrap = [](const proto::IteratorState& root,
                   std::vector<Element>* replay) -> absl::StatusOr<const proto::IteratorState*> {
    if (!root.ints().contains(kReplayKey)) return &root;
    if (root.inputs_size() != 1) return MalformedState("a read-ahead state without its pipeline's");
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
          "; merge the states that all consumers saved at one step into a job checkpoint first "
          "(sluice.merge_saved_states in Python, sluice checkpoint merge on the command line)"));
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
    context.service_resume->num_consumers = options.num_consumers;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = dataset.MakeIterator(context);
  if (!iterator.ok()) return iterator.status();
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
  absl::StatusOr<RestoredIterator> restored = RestoreParts(dataset, fingerprint, bytes, options);
  if (!restored.ok()) return restored.status();
  if (restored->replay.empty()) return std::move(restored->iterator);
  return std::make_unique<ReplayIterator>(std::move(restored->iterator), std::move(restored->replay));
}

absl::StatusOr<std::string> SaveWithReadAhead(IteratorBase& iterator, const std::string& fingerprint,
                                              const std::vector<Element>& ahead) {
  proto::PipelineCheckpoint checkpoint;
  checkpoint.set_version(kPipelineCheckpointVersion);
  checkpoint.set_fingerprint(fingerprint);
  if (auto* replay = dynamic_cast<ReplayIterator*>(&iterator); replay != nullptr) {
    if (absl::Status s = replay->SaveWith(ahead, checkpoint.mutable_root()); !s.ok()) return s;
  } else {
    proto::IteratorState* root = checkpoint.mutable_root();
    (*root->mutable_ints())[kReplayKey] = 1;
    for (const Element& element : ahead) SaveElement(element, root);
    if (absl::Status s = SaveInput(iterator, root); !s.ok()) return s;
  }
  return checkpoint.SerializeAsString();
}

}  // namespace internal

absl::StatusOr<std::string> MergeSavedStates(const std::vector<std::string>& consumer_states) {
  std::vector<std::pair<std::string, std::string>> named;
  for (size_t i = 0; i < consumer_states.size(); ++i)
    named.emplace_back(absl::StrCat("state ", i), consumer_states[i]);
  return internal::MergeNamedStates(named);
}

}  // namespace sluice
