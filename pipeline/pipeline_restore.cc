#include "pipeline/pipeline_restore.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "pipeline/iterator_state.h"
#include "pipeline/replay_iterator.h"
#include "sluice/proto/checkpoint.pb.h"

namespace sluice {
namespace {

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

absl::StatusOr<RestoredIterator> RestoreParts(const DatasetBase& dataset, const std::string& fingerprint,
                                              const std::string& bytes, const RestoreAs& options) {
  if (options.num_consumers < 1 || options.consumer_index < 0 ||
      options.consumer_index >= options.num_consumers) {
    return absl::InvalidArgumentError(absl::StrCat("restore: consumer index ", options.consumer_index,
                                                   " is outside [0, ", options.num_consumers, ")"));
  }
  absl::StatusOr<proto::PipelineCheckpoint> checkpoint = ParsePipelineCheckpoint(bytes, fingerprint);
  if (!checkpoint.ok()) return checkpoint.status();
  // A state saved with elements read ahead (pipeline/replay_iterator.h)
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
                                                              const RestoreAs& options) {
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

}  // namespace sluice
