#include "cli/input_reader.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "cli/replica_reader.h"
#include "cli/summary.h"
#include "common/json.h"
#include "pipeline/builder.h"
#include "pipeline/function.h"
#include "pipeline/iterator_state.h"
#include "pipeline/pipeline_restore.h"
#include "pipeline/yaml_loader.h"

namespace sluice::cli {
namespace {

// Counts the tokens and the padding of packed text: an element with an
// int32 component named segment_ids (pack_sequences', batched or not).
void CountPackedTokens(const Element& element, StepSize* size) {
  if (!element.named()) return;
  for (size_t i = 0; i < element.size(); ++i) {
    const Tensor& segments = element.components[i];
    if ((*element.names)[i] != "segment_ids" || segments.dtype() != DType::kInt32) continue;
    size->tokens = 0;
    for (int32_t segment : segments.values<int32_t>()) size->tokens += segment != 0 ? 1 : 0;
    size->padding = segments.num_elements() - size->tokens;
    return;
  }
}

class ElementReader : public InputReader {
 public:
  ElementReader(DatasetPtr dataset, std::string fingerprint)
      : dataset_(std::move(dataset)), fingerprint_(std::move(fingerprint)) {}

  absl::Status Start() override {
    absl::StatusOr<std::unique_ptr<IteratorBase>> iterator =
        restore_.has_value() ? RestoreIterator(*dataset_, fingerprint_, *restore_,
                                               RestoreAs{.num_consumers = restore_as_.num_consumers,
                                                         .consumer_index = restore_as_.consumer_index})
                             : dataset_->MakeIterator(IteratorContext{});
    if (!iterator.ok()) return iterator.status();
    iterator_ = *std::move(iterator);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> SaveState() override { return SavePipelineState(*iterator_, fingerprint_); }
  absl::Status SetRestoreState(std::string state, const RestoreOptions& as) override {
    restore_ = std::move(state);
    restore_as_ = as;
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Next() override {
    bool end = false;
    // Drops the previous element first, so that its buffers are free for
    // reuse while the next one is made.
    element_ = Element();
    if (absl::Status status = iterator_->GetNext(&element_, &end); !status.ok()) return status;
    return !end;
  }

  absl::StatusOr<std::string> CurrentJson() const override { return ElementToJson(element_); }
  absl::StatusOr<std::string> CurrentSummary() const override { return ElementSummary(element_); }

  StepSize CurrentSize() const override {
    StepSize size;
    size.rows = element_.components.empty() || element_.components[0].shape().empty()
                    ? 1
                    : element_.components[0].shape()[0];
    for (const Tensor& tensor : element_.components) size.bytes += static_cast<int64_t>(tensor.ByteSize());
    CountPackedTokens(element_, &size);
    return size;
  }

 private:
  const DatasetPtr dataset_;
  const std::string fingerprint_;
  std::optional<std::string> restore_;
  RestoreOptions restore_as_;
  std::unique_ptr<IteratorBase> iterator_;
  Element element_;
};

// The pipeline file with the flags applied to its `distribute` step.
absl::StatusOr<LoadedPipeline> LoadWithServiceFlags(const ReadOptions& options, bool service_required,
                                                    std::string* distribute_location) {
  if (absl::Status status = LoadPlugins(options.run.plugins); !status.ok()) return status;
  // Not validated on load: the steps before `distribute` may read files
  // that only the workers have. Building checks the rest.
  absl::StatusOr<LoadedPipeline> pipeline = LoadPipelineFile(options.run.pipeline_path, {.validate = false});
  if (!pipeline.ok()) return pipeline.status();
  proto::DistributeOp* distribute = nullptr;
  for (int i = 0; i < pipeline->def.steps_size(); ++i) {
    if (!pipeline->def.steps(i).has_distribute()) continue;
    const std::string where =
        i < static_cast<int>(pipeline->step_locations.size()) ? pipeline->step_locations[i] + ": " : "";
    if (distribute != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "step ", i + 1,
                       " (distribute): a pipeline has one distribute step at most; "
                       "the first is ",
                       *distribute_location));
    }
    distribute = pipeline->def.mutable_steps(i)->mutable_distribute();
    *distribute_location = absl::StrCat(where, "step ", i + 1, " (distribute)");
  }
  if (distribute == nullptr) {
    if (options.service.empty()) {
      if (service_required) {
        return absl::InvalidArgumentError(absl::StrCat(options.run.pipeline_path,
                                                       ": the pipeline has no distribute step; add one or "
                                                       "pass --service grpc://HOST:PORT"));
      }
      if (!options.job_name.empty() || !options.processing_mode.empty() || !options.sharding_policy.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            options.run.pipeline_path,
            ": --job-name, --processing-mode and --sharding-policy need a distribute step or --service"));
      }
      return pipeline;  // runs in this process
    }
    distribute = pipeline->def.add_steps()->mutable_distribute();
    pipeline->step_locations.push_back("--service");
  }
  if (!options.service.empty()) distribute->set_service(options.service);
  if (!options.job_name.empty()) distribute->set_job_name(options.job_name);
  if (!options.processing_mode.empty()) distribute->set_processing_mode(options.processing_mode);
  if (!options.sharding_policy.empty()) distribute->set_sharding_policy(options.sharding_policy);
  // With --restore they name the restoring consumer instead (ReadPipeline).
  if (options.run.restore.empty()) {
    if (options.num_consumers >= 0) distribute->set_num_consumers(options.num_consumers);
    if (options.consumer_index >= 0) distribute->set_consumer_index(options.consumer_index);
  }
  if (options.allow_partial) distribute->set_allow_partial(true);
  if (options.timeout_ms > 0) distribute->set_timeout_ms(options.timeout_ms);
  return pipeline;
}

}  // namespace

absl::Status LoadPlugins(const std::vector<std::string>& plugins) {
  for (const std::string& plugin : plugins) {
    if (absl::Status status = LoadPlugin(plugin); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<InputReader>> InputReader::Open(const ReadOptions& options,
                                                               bool service_required) {
  std::string distribute_location;
  absl::StatusOr<LoadedPipeline> pipeline =
      LoadWithServiceFlags(options, service_required, &distribute_location);
  if (!pipeline.ok()) return pipeline.status();
  absl::StatusOr<std::unique_ptr<InputReader>> reader;
  if (!options.replicas.empty()) {
    reader = OpenReplicaReader(pipeline->def, options.replicas, options.global_batch_size);
  } else {
    BuildOptions build;
    build.step_locations = &pipeline->step_locations;
    absl::StatusOr<DatasetPtr> dataset = BuildDataset(pipeline->def, build);
    if (!dataset.ok()) return dataset.status();
    reader = ForDataset(*std::move(dataset), CheckpointFingerprint(pipeline->def));
  }
  if (reader.ok()) (*reader)->distribute_location_ = std::move(distribute_location);
  return reader;
}

int InputReader::StartOrFail(std::ostream& err) {
  absl::Status status = Start();
  if (status.ok()) return 0;
  const bool refused = absl::IsInvalidArgument(status) || absl::IsFailedPrecondition(status);
  if (refused && !distribute_location_.empty()) {
    status = absl::Status(status.code(), absl::StrCat(distribute_location_, ": ", status.message()));
  }
  return Fail(status, err, refused);
}

std::unique_ptr<InputReader> InputReader::ForDataset(DatasetPtr dataset, std::string fingerprint) {
  return std::make_unique<ElementReader>(std::move(dataset), std::move(fingerprint));
}

}  // namespace sluice::cli
