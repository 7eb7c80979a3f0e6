// Job checkpoints (issue 20): MergeSavedStates, the merge of the states
// that the consumers of one shared job saved at the same step into one
// (sluice/iterator.h). Restoring from either kind of state is
// pipeline/pipeline_restore.h.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/read/split_deliveries.h"
#include "pipeline/iterator_state.h"
#include "sluice/iterator.h"
#include "sluice/proto/checkpoint.pb.h"

namespace sluice {
namespace {

using reader::SplitDeliveries;

// The `distribute` iterator keeps its deliveries under this key
// (client/read/data_service_dataset.cc).
constexpr char kServiceReadKey[] = "service_read";

void FindServiceReads(const proto::IteratorState& state, std::vector<const std::string*>* found) {
  if (auto blob = state.blobs().find(kServiceReadKey); blob != state.blobs().end())
    found->push_back(&blob->second);
  for (const proto::IteratorState& input : state.inputs()) FindServiceReads(input, found);
}

}  // namespace

absl::StatusOr<std::string> MergeSavedStates(const std::vector<NamedState>& states) {
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
                                                        state.fingerprint(), "; ", states.front().name,
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
    if (&bytes != &states.front().bytes && !read.job_name().empty() &&
        (read.job_name() != job_name || read.repetition() != repetition)) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, ": read job '", read.job_name(), "' repetition ", read.repetition(), ", and ",
                       states.front().name, " job '", job_name, "' repetition ", repetition,
                       ": a job checkpoint merges the consumers of one repetition of one job"));
    }
    delivered.Merge(*consumer);
    if (&bytes == &states.front().bytes) {
      repetition = read.repetition();
      job_name = read.job_name();
    }
  }
  *merged.mutable_job() = delivered.ToProto();
  merged.mutable_job()->set_repetition(repetition);
  merged.mutable_job()->set_job_name(job_name);
  return merged.SerializeAsString();
}

absl::StatusOr<std::string> MergeSavedStates(const std::vector<std::string>& consumer_states) {
  std::vector<NamedState> named;
  for (size_t i = 0; i < consumer_states.size(); ++i)
    named.push_back({absl::StrCat("state ", i), consumer_states[i]});
  return MergeSavedStates(named);
}

}  // namespace sluice
