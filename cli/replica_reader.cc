#include "cli/replica_reader.h"

#include <optional>
#include <string>
#include <utility>

#include "sluice/dataset.h"
#include "sluice/distribute.h"

namespace sluice::cli {
namespace {

class ReplicaReader : public InputReader {
 public:
  explicit ReplicaReader(DistributedDataset dataset) : dataset_(std::move(dataset)) {}

  absl::Status Start() override {
    absl::StatusOr<DistributedIterator> iterator =
        restore_.has_value() ? dataset_.MakeIterator(*restore_, restore_as_) : dataset_.MakeIterator();
    if (!iterator.ok()) return iterator.status();
    iterator_.emplace(*std::move(iterator));
    return absl::OkStatus();
  }

  // As of the last step printed: steps on their way to the devices are in
  // the state (DistributedIterator::Save).
  absl::StatusOr<std::string> SaveState() override { return iterator_->Save(); }
  absl::Status SetRestoreState(std::string state, const RestoreOptions& as) override {
    restore_ = std::move(state);
    restore_as_ = as;
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Next() override {
    // Returns the previous step's buffers to their pools first, as a
    // trainer that is done with a step would.
    current_ = PerReplica();
    absl::StatusOr<std::optional<PerReplica>> step = iterator_->GetNextAsOptional();
    if (!step.ok()) return step.status();
    if (!step->has_value()) return false;
    current_ = **std::move(step);
    // A step counts once its values are on their devices, as a trainer
    // would use them; the copies are what a GPU bench measures.
    for (const ReplicaValue& value : current_) {
      if (absl::Status status = value.Wait(); !status.ok()) return status;
    }
    return true;
  }

  absl::StatusOr<std::string> CurrentJson() const override { return current_.ToJson(); }

  StepSize CurrentSize() const override {
    StepSize size;
    for (const ReplicaValue& value : current_) {
      size.rows += value.num_rows();
      for (const DeviceTensor& tensor : value.components)
        size.bytes += static_cast<int64_t>(tensor.byte_size());
    }
    return size;
  }

 private:
  const DistributedDataset dataset_;
  std::optional<std::string> restore_;
  RestoreOptions restore_as_;
  std::optional<DistributedIterator> iterator_;
  PerReplica current_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<InputReader>> OpenReplicaReader(const proto::DatasetDef& def,
                                                               const std::vector<std::string>& devices,
                                                               int64_t global_batch_size) {
  absl::StatusOr<ReplicaSet> replicas = ReplicaSet::Create(devices);
  if (!replicas.ok()) return replicas.status();
  DistributeOptions options;
  options.global_batch_size = global_batch_size;
  // The CLI holds the loaded YAML as a definition; the SDK takes it as the
  // serialized definition a Dataset saves.
  absl::StatusOr<Dataset> dataset_def = Dataset::Deserialize(def.SerializeAsString());
  if (!dataset_def.ok()) return dataset_def.status();
  absl::StatusOr<DistributedDataset> dataset = DistributeDataset(*dataset_def, *replicas, options);
  if (!dataset.ok()) return dataset.status();
  return std::make_unique<ReplicaReader>(*std::move(dataset));
}

}  // namespace sluice::cli
